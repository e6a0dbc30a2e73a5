package bisect

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/internal/testrepo"
)

// TestGitStopsWithTheRunsContext: the git that OpenGraph and Infos run
// belongs to the run: once its context has ended, neither reads anything,
// and each says which repository it was reading; with a live context the
// same calls read the commits' subjects.
func TestGitStopsWithTheRunsContext(t *testing.T) {
	h := testrepo.Generate(3, testrepo.Shape{Commits: 20, Subsystems: 2})
	dir := t.TempDir()
	hashes, err := h.Write(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if g, err := OpenGraph(cancelled, dir); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), dir) {
		if g != nil {
			g.Close()
		}
		t.Fatalf("OpenGraph after the run was cancelled: %v, want context.Canceled naming %s", err, dir)
	}
	g, err := OpenGraph(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	hs := []plumbing.Hash{plumbing.NewHash(hashes[0]), plumbing.NewHash(hashes[5])}
	if infos, err := g.Infos(cancelled, hs); !errors.Is(err, context.Canceled) || infos != nil {
		t.Errorf("Infos after the run was cancelled: %v, %v; want context.Canceled and nothing", infos, err)
	}
	if _, err := g.Info(cancelled, hs[0]); !errors.Is(err, context.Canceled) {
		t.Errorf("Info after the run was cancelled: %v", err)
	}
	infos, err := g.Infos(context.Background(), hs)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{h.Commits[0].Subject, h.Commits[5].Subject} {
		if got := infos[hs[i]].Subject; got != want {
			t.Errorf("subject of %s: %q, want %q", hs[i], got, want)
		}
	}
}

// TestAMergesInfoIsReadWithoutItsCombinedDiff: a merge's subject comes
// from its commit object alone. `git show -s` in git 2.39 still computes
// the combined diff of a merge, reading every parent's trees (0.6 s on a
// u-boot merge); with a tree of one parent missing it failed outright.
// Once read, a commit's info is not read again: a cancelled context, with
// which git cannot run, still has it.
func TestAMergesInfoIsReadWithoutItsCombinedDiff(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) string {
		return gitIn(t, dir, append([]string{"-c", "user.name=Ann", "-c", "user.email=ann@example.org"}, args...)...)
	}
	write := func(text string) {
		if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "sub", "f"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q", "-b", "main")
	write("0\n")
	git("add", ".")
	git("commit", "-q", "-m", "base")
	git("checkout", "-q", "-b", "side")
	write("side\n")
	git("commit", "-q", "-am", "side")
	git("checkout", "-q", "main")
	write("main\n")
	git("commit", "-q", "-am", "main")
	git("merge", "-q", "-s", "ours", "--no-commit", "side")
	write("merged\n") // differs from both parents: a combined diff has it
	git("commit", "-q", "-am", "Merge branch 'side'")
	merge := plumbing.NewHash(git("rev-parse", "HEAD"))
	// Only side's commit reaches this tree: without it, git can diff
	// the merge against no parent but can still read the merge itself.
	tree := git("rev-parse", "side:sub")
	if err := os.Remove(filepath.Join(dir, ".git", "objects", tree[:2], tree[2:])); err != nil {
		t.Fatal(err)
	}

	g, err := OpenGraph(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	info, err := g.Info(context.Background(), merge)
	if err != nil {
		t.Fatalf("Info of a merge whose parent's tree is missing: %v", err)
	}
	want := CommitInfo{Hash: merge, Subject: "Merge branch 'side'", Author: "Ann <ann@example.org>", Date: git("log", "-1", "--format=%ad", "--date=default")}
	if info != want {
		t.Errorf("Info of the merge: %+v, want %+v", info, want)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if again, err := g.Info(cancelled, merge); err != nil || again != want {
		t.Errorf("Info read again with a cancelled context: %+v, %v; want %+v kept from the first read", again, err, want)
	}
	if _, err := g.Info(cancelled, plumbing.NewHash(git("rev-parse", "main^"))); !errors.Is(err, context.Canceled) {
		t.Errorf("Info of a commit never read, with a cancelled context: %v, want context.Canceled", err)
	}
}
