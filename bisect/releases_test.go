package bisect

import (
	"context"
	"fmt"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/internal/testrepo"
	"kbisect/verdict"
)

// stableRepo writes a linear history tagged as a stable tree: v6.11 at
// the root, v6.12 at commit 10, then v6.12.1 … v6.12.60 every other
// commit; plus what is not a release or not below: -rc tags, a v6.11.5
// on a side branch, a newer v6.13.
func stableRepo(t *testing.T) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	h := &testrepo.History{}
	const n = 10 + 2*60 + 3
	for i := 0; i < n; i++ {
		c := testrepo.Commit{Date: int64(1700000000 + 60*i), Subject: "c"}
		if i > 0 {
			c.Parents = []int{i - 1}
		}
		h.Commits = append(h.Commits, c)
	}
	h.Commits = append(h.Commits, testrepo.Commit{Parents: []int{3}, Date: 1700000000 + 60*200, Subject: "side"})
	h.Mainline = n - 1
	hashes, err := h.Write(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]string{"v6.11": hashes[0], "v6.12-rc1": hashes[5], "v6.12": hashes[10], "v6.11.5": hashes[n], "v6.13": hashes[n-1]}
	for p := 1; p <= 60; p++ {
		tags[fmt.Sprintf("v6.12.%d", p)] = hashes[10+2*p]
	}
	for name, c := range tags {
		args := []string{"tag", name, c}
		if name == "v6.12.50" || name == "v6.12" {
			args = []string{"tag", "-a", "-m", name, name, c} // annotated: peeled
		}
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir, tags
}

func tagsOf(w *WalkBack) string {
	var s []string
	for _, c := range w.Candidates {
		s = append(s, c.Tag)
	}
	return strings.Join(s, " ")
}

func TestPlanWalkBackFromAStableTag(t *testing.T) {
	dir, tags := stableRepo(t)
	g, err := OpenGraph(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	good, err := g.Resolve("v6.12.57")
	if err != nil {
		t.Fatal(err)
	}
	w, err := g.PlanWalkBack("v6.12.57", good, 0)
	if err != nil {
		t.Fatal(err)
	}
	if w.From.Tag != "v6.12.57" {
		t.Errorf("from %s, want v6.12.57", w.From.Tag)
	}
	if got, want := tagsOf(w), "v6.12.56 v6.12.54 v6.12.50 v6.12.42 v6.12.26 v6.12"; got != want {
		t.Errorf("candidates %q, want %q", got, want)
	}
	for _, c := range w.Candidates {
		if c.Commit.String() != tags[c.Tag] {
			t.Errorf("%s peeled to %s, want %s", c.Tag, c.Commit, tags[c.Tag])
		}
	}
	w, err = g.PlanWalkBack("v6.12.57", good, 2)
	if err != nil {
		t.Fatal(err)
	}
	// Only one older series has a base: v6.11.5 is no base, v6.12-rc1
	// no release.
	if got, want := tagsOf(w), "v6.12.56 v6.12.54 v6.12.50 v6.12.42 v6.12.26 v6.12 v6.11"; got != want {
		t.Errorf("with older series: candidates %q, want %q", got, want)
	}
}

func TestPlanWalkBackFromAnUntaggedCommit(t *testing.T) {
	dir, tags := stableRepo(t)
	g, err := OpenGraph(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	good, err := g.Resolve("v6.12.3~1")
	if err != nil {
		t.Fatal(err)
	}
	w, err := g.PlanWalkBack(good.String(), good, 0)
	if err != nil {
		t.Fatal(err)
	}
	if w.From.Tag != "v6.12.2" {
		t.Errorf("from %s, want v6.12.2 (the newest release below)", w.From.Tag)
	}
	if got, want := tagsOf(w), "v6.12.2 v6.12.1 v6.12"; got != want {
		t.Errorf("candidates %q, want %q", got, want)
	}
	if anc, err := g.IsAncestor(w.Candidates[0].Commit, good); err != nil || !anc {
		t.Errorf("IsAncestor(v6.12.2, v6.12.3~1) = %v, %v", anc, err)
	}
	side, _ := g.Resolve("v6.11.5")
	if anc, err := g.IsAncestor(side, good); err != nil || anc {
		t.Errorf("IsAncestor(v6.11.5 on a side branch, v6.12.3~1) = %v, %v", anc, err)
	}
	_ = tags
}

func TestParseRelease(t *testing.T) {
	for _, c := range []struct {
		tag  string
		ok   bool
		want Release
	}{
		{"v6.12.57", true, Release{Tag: "v6.12.57", Major: 6, Minor: 12, Patch: 57}},
		{"v6.12", true, Release{Tag: "v6.12", Major: 6, Minor: 12, Patch: -1}},
		{"v6.12.57-rt14", true, Release{Tag: "v6.12.57-rt14", Major: 6, Minor: 12, Patch: 57, Flavour: "rt14"}},
		{"v6.12-rt5", true, Release{Tag: "v6.12-rt5", Major: 6, Minor: 12, Patch: -1, Flavour: "rt5"}},
		{"v6.12-rc7", false, Release{}},
		{"6.12.57", false, Release{}},
		{"v6.12.57.1", false, Release{}},
		{"next-20241130", false, Release{}},
	} {
		got, ok := ParseRelease(c.tag)
		if ok != c.ok || got != c.want {
			t.Errorf("ParseRelease(%q) = %+v, %v; want %+v, %v", c.tag, got, ok, c.want, c.ok)
		}
	}
}

// TestWalkBackCost is the seeded simulation behind the note on what the
// walk back costs: on a stable-like linear tree (v6.12 and 60 releases,
// two commits each), a regression planted k releases below the good tag
// v6.12.57 (or in the series before, k = 58). The walk measures releases
// as PlanWalkBack orders them; the bisection then runs, with git's
// choices, from the release found good to the oldest one found bad. The
// cost is the walk's kernels plus the bisection's steps, against the
// steps of a bisection from the release just below the regression (what
// a user who knew would have typed).
func TestWalkBackCost(t *testing.T) {
	dir, tags := stableRepo(t)
	g, err := OpenGraph(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	good, _ := g.Resolve("v6.12.57")
	var lines []string
	for _, k := range []int{1, 2, 3, 4, 6, 10, 20, 35, 56, 57, 58} {
		// The regression: the commit just above release 57-k (v6.12 for
		// 57, v6.11 for 58), so release 57-k is good and 58-k bad.
		lowRel := map[int]string{57: "v6.12", 58: "v6.11"}[k]
		if k < 57 {
			lowRel = fmt.Sprintf("v6.12.%d", 57-k)
		}
		low, _ := g.Resolve(lowRel)
		var planted plumbingHash
		parents := map[string]string{}
		for c := good; ; {
			ps, err := g.Parents(c)
			if err != nil || len(ps) == 0 {
				break
			}
			parents[ps[0].String()] = c.String()
			if ps[0] == low {
				planted = c
				break
			}
			c = ps[0]
		}
		isBad := func(c plumbingHash) bool {
			anc, err := g.IsAncestor(planted, c)
			if err != nil {
				t.Fatal(err)
			}
			return anc
		}
		w, err := g.PlanWalkBack("v6.12.57", good, 1)
		if err != nil {
			t.Fatal(err)
		}
		kernels, lastBad, found := 0, good, plumbingHash{}
		var walked []string
		for _, c := range w.Candidates {
			kernels++
			if isBad(c.Commit) {
				lastBad = c.Commit
				walked = append(walked, c.Tag+" bad")
				continue
			}
			found = c.Commit
			walked = append(walked, c.Tag+" good")
			break
		}
		if found.IsZero() {
			t.Fatalf("k=%d: no good release found: %v", k, walked)
		}
		// Growing steps: about log2(k) kernels to get below the
		// regression, one more for the series' base.
		if limit := bits.Len(uint(k)) + 1; k < 57 && kernels > limit {
			t.Errorf("k=%d: %d kernels (%v), more than %d", k, kernels, walked, limit)
		}
		steps := bisectSteps(t, g, lastBad, found, isBad, planted)
		ideal := bisectSteps(t, g, good, low, isBad, planted)
		lines = append(lines, fmt.Sprintf("k=%2d  walk %d kernels (%s)  bisect %d steps  total %2d  (knowing the range: %d steps; extra %d)",
			k, kernels, strings.Join(walked, ", "), steps, kernels+steps, ideal, kernels+steps-ideal))
		_ = tags
	}
	t.Log("walk back on 60 releases of 2 commits, good tag v6.12.57:\n" + strings.Join(lines, "\n"))
}

// bisectSteps runs the session from good to bad with the oracle and
// returns the steps taken, checking that it names the planted commit.
func bisectSteps(t *testing.T, g *Graph, bad, good plumbingHash, isBad func(plumbingHash) bool, planted plumbingHash) int {
	t.Helper()
	s := NewSession(g, bad, []plumbingHash{good}, false)
	for steps := 0; ; steps++ {
		st, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if st.Kind == StepFound {
			if st.Commit != planted {
				t.Fatalf("found %s, planted %s", st.Commit, planted)
			}
			return steps
		}
		if st.Kind != StepTest {
			t.Fatalf("step %v", st.Kind)
		}
		v := verdict.Good
		if isBad(st.Commit) {
			v = verdict.Bad
		}
		if err := s.Mark(st.Commit, v); err != nil {
			t.Fatal(err)
		}
	}
}

type plumbingHash = plumbing.Hash

// TestARangeRecordRestartsTheBisection: a range record in the session log
// starts the bisection again on its range, Restore and GitLog alike; git
// bisect replay reads the log to the same state (git as the oracle).
func TestARangeRecordRestartsTheBisection(t *testing.T) {
	dir, tags := stableRepo(t)
	g, err := OpenGraph(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	records := []Record{
		{Event: EventStart, Bad: tags["v6.12.60"], Good: []string{tags["v6.12.57"]}},
		{Event: EventRange, Bad: tags["v6.12.56"], Good: []string{tags["v6.12.54"]}, Note: "the good endpoint measured bad"},
	}
	s, _, err := Restore(g, records)
	if err != nil {
		t.Fatal(err)
	}
	if goods := s.Goods(); len(goods) != 1 || goods[0].String() != tags["v6.12.54"] || s.bad.String() != tags["v6.12.56"] {
		t.Fatalf("restored: bad %s, goods %v", s.bad, goods)
	}
	step, err := s.Next()
	if err != nil || step.Kind != StepTest {
		t.Fatalf("next: %+v, %v", step, err)
	}
	log, err := GitLog(context.Background(), g, records, nil)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "bisect.log")
	if err := os.WriteFile(file, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s\nthe log:\n%s", args, err, out, log)
		}
		return strings.TrimSpace(string(out))
	}
	// kbisect reads its own log back to the same session.
	rep, err := ParseGitLog(file, strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Bad != tags["v6.12.56"] || len(rep.Goods) != 1 || rep.Goods[0] != tags["v6.12.54"] || len(rep.Marks) != 0 {
		t.Errorf("ParseGitLog of the restarted log: bad %s, goods %v, marks %v", rep.Bad, rep.Goods, rep.Marks)
	}
	git("bisect", "replay", file)
	defer git("bisect", "reset")
	refs := git("for-each-ref", "--format=%(refname) %(objectname)", "refs/bisect/")
	want := fmt.Sprintf("refs/bisect/bad %s\nrefs/bisect/good-%s %s", tags["v6.12.56"], tags["v6.12.54"], tags["v6.12.54"])
	if refs != want {
		t.Errorf("git's state after replay:\n%s\nwant:\n%s", refs, want)
	}
	if head := git("rev-parse", "HEAD"); head != step.Commit.String() {
		t.Errorf("git checks out %s, the session tests %s", head, step.Commit)
	}
}

func TestPlanWalkBackFlavoursAndBases(t *testing.T) {
	dir, tags := stableRepo(t)
	for name, at := range map[string]string{"v6.12.57-rt14": "v6.12.57", "v6.12.57-rt13": "v6.12.57~1", "v6.12.56-rt13": "v6.12.56",
		"v6.12.55-rt12": "v6.12.55", "v6.12.54-rt12": "v6.12.54", "v6.12-rt1": "v6.12"} {
		if out, err := exec.Command("git", "-C", dir, "tag", name, at).CombinedOutput(); err != nil {
			t.Fatalf("git tag: %v\n%s", err, out)
		}
	}
	g, err := OpenGraph(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	rt, _ := g.Resolve("v6.12.57-rt14")
	w, err := g.PlanWalkBack("v6.12.57-rt14", rt, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The RT releases only, one per stable release, none of .57's own;
	// the RT tree's base.
	if got, want := tagsOf(w), "v6.12.56-rt13 v6.12.54-rt12 v6.12-rt1"; got != want {
		t.Errorf("from v6.12.57-rt14: %q, want %q", got, want)
	}
	// An endpoint just above the series' base tries the base once (its
	// newest tag, v6.12-rt1 on the same commit as v6.12), then the older
	// series' plain base: the tree has no v6.11-rt tag.
	above, _ := g.Resolve("v6.12.1~1")
	w, err = g.PlanWalkBack(above.String(), above, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tagsOf(w), "v6.12-rt1 v6.11"; got != want {
		t.Errorf("from v6.12.1~1: %q, want %q", got, want)
	}
	_ = tags
}
