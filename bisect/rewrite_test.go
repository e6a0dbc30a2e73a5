package bisect

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"kbisect/internal/testrepo"
)

// rewriteRepo is a generated history to rewrite in the ways git knows.
func rewriteRepo(t *testing.T) (string, []string, *testrepo.History) {
	t.Helper()
	h := testrepo.Generate(21, testrepo.Shape{Commits: 600, Subsystems: 3, Octopus: true, CrissCross: true, TiePercent: 10})
	dir := t.TempDir()
	hashes, err := h.Write(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return dir, hashes, h
}

// sameAsRevList checks the engine's candidates and midpoint against git's
// on dir for the range bad ^goods.
func sameAsRevList(t *testing.T, dir string, c revListCase, wantGraph bool) {
	t.Helper()
	g, err := OpenGraph(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.HasCommitGraph() != wantGraph {
		t.Errorf("commit-graph in use: %v, want %v", g.HasCommitGraph(), wantGraph)
	}
	got, _, bis := engineBisection(t, g, c, false)
	want := gitIn(t, dir, c.args("--bisect")...)
	if len(got) != 1 || got[0] != want {
		t.Errorf("%v: engine %v, git %s", c, got, want)
	}
	if n := bisectVar(gitIn(t, dir, c.args("--bisect-vars")...), "bisect_all"); n != itoa(bis.all) {
		t.Errorf("%v: %d candidates, git %s", c, bis.all, n)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestGraphFollowsAShallowClone(t *testing.T) {
	src, _, _ := rewriteRepo(t)
	dir := filepath.Join(t.TempDir(), "shallow")
	gitIn(t, t.TempDir(), "clone", "-q", "--depth", "12", "file://"+src, dir)
	head := gitIn(t, dir, "rev-parse", "HEAD")
	for _, good := range []string{"HEAD~6", "HEAD~10"} {
		sameAsRevList(t, dir, revListCase{bad: head, goods: []string{gitIn(t, dir, "rev-parse", good)}}, false)
	}
}

func TestGraphFollowsGraftsAndReplaceRefs(t *testing.T) {
	dir, hashes, h := rewriteRepo(t)
	gitIn(t, dir, "commit-graph", "write", "--reachable")
	bad := hashes[h.Mainline]
	c := revListCase{bad: bad, goods: []string{hashes[100]}}

	// A replace ref that cuts a merge down to its first parent.
	// A merge whose second parent brings commits the first does not.
	anc := h.Ancestors()
	merge := -1
	for i := len(h.Commits) - 50; i > 300; i-- {
		if c := h.Commits[i]; len(c.Parents) == 2 && !anc[c.Parents[0]].Has(c.Parents[1]) && c.Parents[1] > 150 {
			merge = i
			break
		}
	}
	if merge < 0 {
		t.Fatal("no merge to rewrite")
	}
	// Bisect up to the rewritten merge itself, so its parents decide.
	c = revListCase{bad: hashes[merge], goods: []string{hashes[100]}}
	gitIn(t, dir, "replace", "--graft", hashes[merge], hashes[h.Commits[merge].Parents[0]])
	sameAsRevList(t, dir, c, false)
	oneLevel := gitIn(t, dir, c.args("--count")...)
	// A replacement that is itself replaced: git follows the chain.
	first := gitIn(t, dir, "rev-parse", "refs/replace/"+hashes[merge])
	gitIn(t, dir, "replace", "--graft", first, hashes[h.Commits[merge].Parents[1]])
	sameAsRevList(t, dir, c, false)
	if chained := gitIn(t, dir, c.args("--count")...); chained == oneLevel {
		t.Fatalf("the chained replacement does not change the range (%s commits): the case tests nothing", chained)
	}
	gitIn(t, dir, "replace", "-d", first)
	gitIn(t, dir, "replace", "-d", hashes[merge])
	sameAsRevList(t, dir, c, true)

	// A graft file that gives a commit an extra parent from further back.
	graft := hashes[400] + " " + hashes[h.Commits[400].Parents[0]] + " " + hashes[150] + "\n"
	if err := os.WriteFile(filepath.Join(dir, ".git", "info", "grafts"), []byte(graft), 0o644); err != nil {
		t.Fatal(err)
	}
	sameAsRevList(t, dir, c, false)
}

func TestGraphReadsObjectsAndCommitGraphOfAlternates(t *testing.T) {
	src, hashes, h := rewriteRepo(t)
	gitIn(t, src, "commit-graph", "write", "--reachable")
	dir := filepath.Join(t.TempDir(), "shared")
	gitIn(t, t.TempDir(), "clone", "-q", "--shared", src, dir)
	if _, err := os.Stat(filepath.Join(dir, ".git", "objects", "info", "alternates")); err != nil {
		t.Fatal(err)
	}
	sameAsRevList(t, dir, revListCase{bad: hashes[h.Mainline], goods: []string{hashes[120]}}, true)

	// Without the commit-graph, commits come from the alternate's objects.
	os.Remove(filepath.Join(src, ".git", "objects", "info", "commit-graph"))
	sameAsRevList(t, dir, revListCase{bad: hashes[h.Mainline], goods: []string{hashes[120]}}, false)
	g, err := OpenGraph(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if got, err := g.Resolve(hashes[300]); err != nil || got.String() != hashes[300] {
		t.Errorf("Resolve(%s) through the alternate = %v, %v", hashes[300], got, err)
	}
}

func TestGraphInALinkedWorktreeUsesTheCommonDirectory(t *testing.T) {
	src, hashes, h := rewriteRepo(t)
	gitIn(t, src, "commit-graph", "write", "--reachable")
	wt := filepath.Join(t.TempDir(), "wt")
	gitIn(t, src, "worktree", "add", "-q", "--detach", wt, hashes[h.Mainline])
	sameAsRevList(t, wt, revListCase{bad: hashes[h.Mainline], goods: []string{hashes[150]}}, true)
}

func TestGraphRefusesRelativeAlternatesItCannotFollow(t *testing.T) {
	src, _, _ := rewriteRepo(t)
	dir := filepath.Join(t.TempDir(), "shared")
	gitIn(t, t.TempDir(), "clone", "-q", "--shared", src, dir)
	rel, err := filepath.Rel(filepath.Join(dir, ".git", "objects"), filepath.Join(src, ".git", "objects"))
	if err != nil {
		t.Fatal(err)
	}
	alt := filepath.Join(dir, ".git", "objects", "info", "alternates")
	if err := os.WriteFile(alt, []byte(rel+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "rev-parse", "HEAD") // git itself follows it
	_, err = OpenGraph(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), "alternates:1") || !strings.Contains(err.Error(), filepath.Join(src, ".git", "objects")) {
		t.Fatalf("OpenGraph with a relative alternate: %v", err)
	}
}
