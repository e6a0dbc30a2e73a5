package simlab_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"kbisect/internal/simhost"
	"kbisect/internal/simlab"
)

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestTheSameSeedGivesTheSameTree(t *testing.T) {
	t.Parallel()
	opt := simlab.Options{Seed: 7, Commits: 80}
	a, err := simlab.NewTree(filepath.Join(t.TempDir(), "a"), opt)
	if err != nil {
		t.Fatal(err)
	}
	b, err := simlab.NewTree(filepath.Join(t.TempDir(), "b"), opt)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Commits, b.Commits) || a.Regression != b.Regression || !slices.Equal(a.Broken, b.Broken) || a.Good != b.Good || a.Bad != b.Bad {
		t.Errorf("the same seed, two trees:\n%+v\n%+v", a, b)
	}
	if len(a.Commits) != 80 || a.Good != "v6.12.57" || !strings.HasPrefix(a.Bad, "v6.12.") || a.Expected.FirstBad != a.Regression {
		t.Errorf("%d commits, %s..%s, expected %+v, regression %s", len(a.Commits), a.Good, a.Bad, a.Expected, a.Regression)
	}
	if got := gitOut(t, a.Dir, "rev-parse", a.Good, a.Bad, "master"); got != a.GoodCommit+"\n"+a.BadCommit+"\n"+a.BadCommit {
		t.Errorf("the tags and master name %q", got)
	}
	if len(a.Broken) < 2 || len(a.DocOnly) == 0 || !a.IsBad(a.BadCommit) || a.IsBad(a.GoodCommit) || !a.Builds(a.GoodCommit) || !a.Builds(a.BadCommit) {
		t.Errorf("broken %d, doc-only %d, bad endpoint bad %v, good endpoint bad %v", len(a.Broken), len(a.DocOnly), a.IsBad(a.BadCommit), a.IsBad(a.GoodCommit))
	}
	// The regression is a commit of the range, and only its descendants
	// are bad.
	if got := gitOut(t, a.Dir, "log", "--format=%s", "-1", a.Regression); got != "eventpoll: Replace rwlock with spinlock" {
		t.Errorf("the regression says %q", got)
	}
	for _, c := range strings.Fields(gitOut(t, a.Dir, "rev-list", a.Good+".."+a.Bad)) {
		isDescendant := exec.Command("git", "-C", a.Dir, "merge-base", "--is-ancestor", a.Regression, c).Run() == nil
		if a.IsBad(c) != isDescendant {
			t.Errorf("%s: bad %v, descends from the regression %v", c, a.IsBad(c), isDescendant)
		}
	}
	other, err := simlab.NewTree(filepath.Join(t.TempDir(), "c"), simlab.Options{Seed: 8, Commits: 80})
	if err != nil {
		t.Fatal(err)
	}
	if other.Regression == a.Regression || slices.Equal(other.Commits, a.Commits) {
		t.Error("another seed made the same tree")
	}
}

// bisectScript is what a kernel developer would give git bisect run: build
// (a kernel that does not build is skipped), then look at the noise level
// the image carries. The tree's Kconfig does not change: the .config made
// once before serves every step.
const bisectScript = `make -s -j2 O="$OUT" bzImage >/dev/null 2>&1 || exit 125
level=$(grep -aoE 'KBISECT_SIM_NOISE_US=[0-9]+' "$OUT/arch/x86/boot/bzImage" | cut -d= -f2)
[ -n "$level" ] || exit 255
[ "$level" -lt 10 ]
`

// gitBisect runs git bisect run from the tree's good endpoint to its bad
// one and returns the commits it ends with.
func gitBisect(t *testing.T, tree *simlab.Tree) []string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "noise-check")
	if err := os.WriteFile(script, []byte(bisectScript), 0o755); err != nil {
		t.Fatal(err)
	}
	build := t.TempDir()
	if msg, err := exec.Command("make", "-s", "-C", tree.Dir, "O="+build, "tinyconfig").CombinedOutput(); err != nil {
		t.Fatalf("make tinyconfig: %v\n%s", err, msg)
	}
	gitOut(t, tree.Dir, "bisect", "start", tree.Bad, tree.Good)
	c := exec.Command("git", "-C", tree.Dir, "bisect", "run", "sh", script)
	c.Env = append(os.Environ(), "OUT="+build)
	out, err := c.CombinedOutput()
	gitOut(t, tree.Dir, "bisect", "reset")
	if m := regexp.MustCompile(`(?m)^([0-9a-f]{40}) is the first bad commit`).FindSubmatch(out); m != nil {
		return []string{string(m[1])}
	}
	if _, rest, ok := strings.Cut(string(out), "The first bad commit could be any of:\n"); ok {
		var list []string
		for _, line := range strings.Split(rest, "\n") {
			if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(line) {
				break
			}
			list = append(list, line)
		}
		slices.Sort(list)
		return list
	}
	t.Fatalf("git bisect run: %v\n%s", err, out)
	return nil
}

func TestGitBisectRunFindsThePlantedCommit(t *testing.T) {
	t.Parallel()
	tree, err := simlab.NewTree(filepath.Join(t.TempDir(), "tree"), simlab.Options{Seed: 11, Commits: 110})
	if err != nil {
		t.Fatal(err)
	}
	if got := gitBisect(t, tree); !slices.Equal(got, []string{tree.Regression}) || tree.Expected.FirstBad != tree.Regression {
		t.Errorf("git bisect run ends at %v; the regression is %s, expected %+v", got, tree.Regression, tree.Expected)
	}
}

func TestABrokenParentMakesTheBisectionInconclusiveAsExpected(t *testing.T) {
	t.Parallel()
	tree, err := simlab.NewTree(filepath.Join(t.TempDir(), "tree"), simlab.Options{Seed: 12, Commits: 110, BrokenBeforeRegression: true, Regression: simlab.OnTopic})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(tree.Expected.Candidates))
	parent := gitOut(t, tree.Dir, "rev-parse", tree.Regression+"^")
	if tree.Expected.FirstBad != "" || len(want) < 2 || !slices.Contains(want, tree.Regression) || !slices.Contains(want, parent) || tree.Builds(parent) || tree.OnMainline {
		t.Fatalf("expected %+v, regression %s, its parent %s builds %v", tree.Expected, tree.Regression, parent, tree.Builds(parent))
	}
	if got := gitBisect(t, tree); !slices.Equal(got, want) {
		t.Errorf("git bisect run ends with %v, expected %v", got, want)
	}
}

// A stable-like tree whose regression is older than the good endpoint:
// the releases below it are tagged, the regression sits between the two
// asked for, and git bisect run finds it between them.
func TestARegressionBelowTheGoodEndpoint(t *testing.T) {
	t.Parallel()
	tree, err := simlab.NewTree(filepath.Join(t.TempDir(), "tree"), simlab.Options{Seed: 13, Commits: 400, OlderReleases: 8, RegressionBack: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"v6.12.56", "v6.12.55", "v6.12.54", "v6.12.53", "v6.12.52", "v6.12.51", "v6.12.50", "v6.12.49", "v6.12"}
	if !slices.Equal(tree.Older, want) {
		t.Fatalf("older releases %v, want %v", tree.Older, want)
	}
	commit := func(rev string) string { return strings.TrimSpace(gitOut(t, tree.Dir, "rev-parse", rev+"^{commit}")) }
	for rev, bad := range map[string]bool{"v6.12.57": true, "v6.12.56": true, "v6.12.55": true, "v6.12.54": false, "v6.12.49": false, "v6.12": false} {
		if got := tree.IsBad(commit(rev)); got != bad {
			t.Errorf("%s bad: %v, want %v", rev, got, bad)
		}
	}
	if sub := gitOut(t, tree.Dir, "show", "v6.12.53:Makefile"); !strings.Contains(sub, "SUBLEVEL = 53") {
		t.Errorf("v6.12.53's Makefile:\n%s", sub)
	}
	tree.Good, tree.Bad = "v6.12.54", "v6.12.55"
	if got := gitBisect(t, tree); !slices.Equal(got, []string{tree.Regression}) {
		t.Errorf("git bisect run v6.12.54..v6.12.55 ends at %v; the regression is %s", got, tree.Regression)
	}
}

// A regression in two steps: the planted commit takes the noise to the
// first step's level, a later mainline commit on to the bad one; each
// commit's eventpoll.c carries its level, and reverting the later step on
// the bad endpoint brings the first step's back. A bisection by a
// threshold between the endpoints names the later step.
func TestARegressionInTwoSteps(t *testing.T) {
	t.Parallel()
	tree, err := simlab.NewTree(filepath.Join(t.TempDir(), "tree"), simlab.Options{Seed: 14, Commits: 200, GoodNoise: 7 * time.Microsecond, FirstStep: 9 * time.Microsecond, BadNoise: 15 * time.Microsecond, NoStorm: true})
	if err != nil {
		t.Fatal(err)
	}
	if tree.Later == "" || tree.Later == tree.Regression || gitOut(t, tree.Dir, "merge-base", "--is-ancestor", tree.Regression, tree.Later) != "" {
		t.Fatalf("later step %q, regression %s", tree.Later, tree.Regression)
	}
	marker := func(rev string) string {
		_, rest, _ := strings.Cut(gitOut(t, tree.Dir, "show", rev+":fs/eventpoll.c"), simhost.NoiseMarker)
		level, _, _ := strings.Cut(rest, `"`)
		return level
	}
	for rev, want := range map[string]time.Duration{tree.GoodCommit: 7 * time.Microsecond, tree.Regression + "^": 7 * time.Microsecond, tree.Regression: 9 * time.Microsecond,
		tree.Later + "^": 9 * time.Microsecond, tree.Later: 15 * time.Microsecond, tree.BadCommit: 15 * time.Microsecond} {
		full := gitOut(t, tree.Dir, "rev-parse", rev)
		if got := tree.Noise(full); got != want || marker(rev) != strconv.Itoa(int(want/time.Microsecond)) {
			t.Errorf("%s: noise %v, marker %q; want %v", rev, got, marker(rev), want)
		}
	}
	if s := gitOut(t, tree.Dir, "log", "-1", "--format=%s", tree.Later); s != "eventpoll: Hold ep->lock across the whole wakeup" {
		t.Errorf("the later step's subject: %q", s)
	}
	// A threshold between the endpoints (10 µs) takes the first step for
	// good: git bisect run names the later one.
	if got := gitBisect(t, tree); !slices.Equal(got, []string{tree.Later}) {
		t.Errorf("git bisect run ends at %v; the later step is %s", got, tree.Later)
	}
	work := filepath.Join(t.TempDir(), "work")
	gitOut(t, tree.Dir, "worktree", "add", "-q", "--detach", work, tree.BadCommit)
	gitOut(t, work, "-c", "user.name=t", "-c", "user.email=t@example.org", "revert", "--no-edit", tree.Later)
	if got := marker(gitOut(t, work, "rev-parse", "HEAD")); got != "9" {
		t.Errorf("the bad endpoint without the later step measures %s µs, want 9", got)
	}
}
