package bisect

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/internal/testrepo"
)

// TestRangeCommitsIsGitRevListInTopologicalOrder compares the range with
// git rev-list on a merge-heavy history, with and without
// --first-parent, and checks that parents come first and bad last.
func TestRangeCommitsIsGitRevListInTopologicalOrder(t *testing.T) {
	h := testrepo.Generate(11, testrepo.Shape{Commits: 200, Subsystems: 3, Octopus: true, CrissCross: true, TiePercent: 10})
	dir := t.TempDir()
	hashes, err := h.Write(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := OpenGraph(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	bad, good := hashes[h.Mainline], hashes[h.Mainline/4]
	for _, firstParent := range []bool{false, true} {
		args := []string{"rev-list", bad, "^" + good}
		if firstParent {
			args = append(args, "--first-parent")
		}
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Fields(string(out))
		list, parents, err := g.RangeCommits(plumbing.NewHash(bad), []plumbing.Hash{plumbing.NewHash(good)}, firstParent)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range list {
			got = append(got, c.String())
		}
		if slices.Sort(want); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
			t.Fatalf("first-parent %v: %d commits, git rev-list lists %d", firstParent, len(got), len(want))
		}
		if got[len(got)-1] != bad {
			t.Errorf("first-parent %v: the last commit is %s, not bad %s", firstParent, got[len(got)-1], bad)
		}
		for i, ps := range parents {
			gitParents, _ := g.Parents(list[i])
			for k, p := range ps {
				if p >= i || !slices.Contains(gitParents, list[p]) {
					t.Fatalf("first-parent %v: commit %d has parent %d", firstParent, i, p)
				}
				if firstParent && (k > 0 || list[p] != gitParents[0]) {
					t.Errorf("first-parent: commit %d's parent in the range is not its first", i)
				}
			}
			if i < len(list)-1 && !slices.ContainsFunc(parents[i+1:], func(ps []int) bool { return slices.Contains(ps, i) }) {
				t.Errorf("first-parent %v: commit %d is no parent of a later commit", firstParent, i)
			}
		}
	}
	if list, _, err := g.RangeCommits(plumbing.NewHash(good), []plumbing.Hash{plumbing.NewHash(bad)}, false); err != nil || len(list) != 0 {
		t.Errorf("good ^bad: %d commits, %v", len(list), err)
	}
}
