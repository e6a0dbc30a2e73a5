package bisect

import (
	"context"
	"errors"
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
