package bisect

import (
	"context"
	"fmt"
	"math/rand"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/internal/testrepo"
)

// revListCase is one range for `git rev-list --bisect`.
type revListCase struct {
	bad         string
	goods       []string
	firstParent bool
}

func (c revListCase) args(extra ...string) []string {
	args := []string{"rev-list"}
	args = append(args, extra...)
	if c.firstParent {
		args = append(args, "--first-parent")
	}
	args = append(args, c.bad)
	for _, g := range c.goods {
		args = append(args, "^"+g)
	}
	return args
}

func gitIn(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// engineBisection runs the engine's candidate walk and midpoint choice.
func engineBisection(t testing.TB, g *Graph, c revListCase, all bool) ([]string, []int32, bisection) {
	t.Helper()
	w := newWalk(g)
	tips := []tip{{id: g.id(plumbing.NewHash(c.bad))}}
	for _, gd := range c.goods {
		tips = append(tips, tip{id: g.id(plumbing.NewHash(gd)), uninteresting: true})
	}
	limited, err := w.limitList(tips, c.firstParent)
	if err != nil {
		t.Fatal(err)
	}
	bis := w.findBisection(limited, all, c.firstParent)
	var names []string
	for _, id := range bis.order {
		names = append(names, g.nodes[id].hash.String())
	}
	return names, limited, bis
}

// TestMidpointMatchesRevListBisect compares the first midpoint with
// `git rev-list --bisect`, and the full ordering used when commits are
// skipped with `git rev-list --bisect-all`, on many random ranges of
// merge-heavy histories: random bad commits, one to three good ones, with
// and without --first-parent.
func TestMidpointMatchesRevListBisect(t *testing.T) {
	shapes := []testrepo.Shape{
		{Commits: 1500, Subsystems: 4, Octopus: true, CrissCross: true, TiePercent: 15},
		{Commits: 1500, Subsystems: 2, TiePercent: 40, SkewPercent: 5},
		{Commits: 1500, Subsystems: 3, Octopus: true, TiePercent: 10, SkewPercent: 2},
	}
	// How each history is read: from commit objects, from a commit-graph
	// file, from a split commit-graph chain.
	graphs := [][]string{nil, {"commit-graph", "write", "--reachable"}, {"commit-graph", "write", "--reachable", "--split"}}
	pairs := 60
	if testing.Short() {
		pairs = 15
	}
	for si, shape := range shapes {
		t.Run(fmt.Sprintf("shape%d", si), func(t *testing.T) {
			t.Parallel()
			h := testrepo.Generate(int64(100+si), shape)
			dir := t.TempDir()
			hashes, err := h.Write(dir, func(int) map[string]string { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if graphs[si] != nil {
				gitIn(t, dir, graphs[si]...)
			}
			anc := h.Ancestors()
			rng := rand.New(rand.NewSource(int64(si)))
			naiveAgrees, compared := 0, 0
			for p := 0; p < pairs; p++ {
				bad := len(h.Commits)/2 + rng.Intn(len(h.Commits)/2)
				c := revListCase{bad: hashes[bad], firstParent: p%3 == 2}
				for len(c.goods) < 1+rng.Intn(3) {
					gd := rng.Intn(bad)
					if anc[gd].Has(bad) {
						continue
					}
					c.goods = append(c.goods, hashes[gd])
				}
				// A fresh graph for each range, as each git rev-list is a fresh
				// process: which commits are already parsed decides how far
				// git propagates "uninteresting" when commit dates are skewed.
				g, err := OpenGraph(context.Background(), dir)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				if g.HasCommitGraph() != (graphs[si] != nil) {
					t.Fatalf("commit-graph in use: %v", g.HasCommitGraph())
				}
				want := gitIn(t, dir, c.args("--bisect")...)
				got, _, bis := engineBisection(t, g, c, false)
				if want == "" {
					if len(got) != 0 {
						t.Fatalf("%v: git finds no candidates, engine %v", c, got)
					}
					continue
				}
				if len(got) != 1 || got[0] != want {
					t.Fatalf("%v: engine chose %v, git rev-list --bisect %s", c, got, want)
				}
				if n := bisectVar(gitIn(t, dir, c.args("--bisect-vars")...), "bisect_all"); n != fmt.Sprint(bis.all) {
					var gitAll []string
					for _, line := range strings.Split(gitIn(t, dir, c.args("--bisect-all")...), "\n") {
						gitAll = append(gitAll, strings.Fields(line)[0])
					}
					engAll, _, _ := engineBisection(t, g, c, true)
					var missing, extra []string
					for _, x := range gitAll {
						if !slices.Contains(engAll, x) {
							missing = append(missing, x)
						}
					}
					for _, x := range engAll {
						if !slices.Contains(gitAll, x) {
							extra = append(extra, x)
						}
					}
					t.Fatalf("%v: %d candidates, git counts %s; engine lacks %v, has extra %v", c, bis.all, n, missing, extra)
				}

				// The order used with skips: every candidate with its distance.
				var wantAll []string
				for _, line := range strings.Split(gitIn(t, dir, c.args("--bisect-all")...), "\n") {
					wantAll = append(wantAll, strings.Fields(line)[0])
				}
				g2, err := OpenGraph(context.Background(), dir)
				if err != nil {
					t.Fatal(err)
				}
				defer g2.Close()
				gotAll, _, _ := engineBisection(t, g2, c, true)
				if !slices.Equal(gotAll, wantAll) {
					t.Fatalf("%v: --bisect-all order differs at %d of %d", c, firstDiff(gotAll, wantAll), len(wantAll))
				}
				// How often would "maximise min(w, N-w)" alone pick the same?
				compared++
				if naiveChoice(gotAll) == want {
					naiveAgrees++
				}
			}
			t.Logf("%d ranges agree with git; the plain max-min rule would agree on %d of them", compared, naiveAgrees)
		})
	}
}

func firstDiff(a, b []string) int {
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// naiveChoice is the textbook rule: any commit maximising min(w, N-w),
// taken in git's sorted order (ties by name), without git's list order
// and early stop.
func naiveChoice(all []string) string {
	if len(all) == 0 {
		return ""
	}
	return all[0]
}

// bisectVar reads one variable of `git rev-list --bisect-vars` output.
func bisectVar(out, name string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, name+"="); ok {
			return strings.Trim(v, "'")
		}
	}
	return ""
}

// TestGraphReadsCommitsNewerThanItsCommitGraph: commits made after the
// commit-graph file was written are read from their objects.
func TestGraphReadsCommitsNewerThanItsCommitGraph(t *testing.T) {
	h := testrepo.Generate(5, testrepo.Shape{Commits: 400, Subsystems: 2, Octopus: true})
	dir := t.TempDir()
	hashes, err := h.Write(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "commit-graph", "write", "--reachable")
	gitIn(t, dir, "checkout", "-q", "-b", "side", hashes[100])
	for i := 0; i < 5; i++ {
		gitIn(t, dir, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", fmt.Sprint("new ", i))
	}
	gitIn(t, dir, "checkout", "-q", "master")
	gitIn(t, dir, "-c", "user.name=T", "-c", "user.email=t@e", "merge", "-q", "--no-ff", "-m", "merge side", "side")
	bad := gitIn(t, dir, "rev-parse", "HEAD")

	g, err := OpenGraph(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if !g.HasCommitGraph() {
		t.Fatal("the commit-graph file was not used")
	}
	c := revListCase{bad: bad, goods: []string{hashes[50]}}
	got, _, bis := engineBisection(t, g, c, false)
	if want := gitIn(t, dir, c.args("--bisect")...); len(got) != 1 || got[0] != want {
		t.Fatalf("engine %v, git %s", got, want)
	}
	if n := bisectVar(gitIn(t, dir, c.args("--bisect-vars")...), "bisect_all"); n != fmt.Sprint(bis.all) {
		t.Fatalf("%d candidates, git %s", bis.all, n)
	}
}
