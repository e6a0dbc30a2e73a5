package bisect

import (
	"context"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/internal/testrepo"
	"kbisect/verdict"
)

// TestAForkSaysWhatComesNextAfterEitherVerdict: the commit a fork picks
// after a verdict is the one the session picks after the same verdict.
func TestAForkSaysWhatComesNextAfterEitherVerdict(t *testing.T) {
	dir := t.TempDir()
	h := testrepo.Generate(7, testrepo.Shape{Commits: 300, Subsystems: 3})
	hashes, err := h.Write(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	open := func() *Graph {
		g, err := OpenGraph(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}
	for _, v := range []verdict.Verdict{verdict.Good, verdict.Bad, verdict.Skip} {
		s := NewSession(open(), plumbing.NewHash(hashes[h.Mainline]), []plumbing.Hash{plumbing.NewHash(hashes[0])}, false)
		step, err := s.Next()
		if err != nil || step.Kind != StepTest {
			t.Fatalf("%v %v", step, err)
		}
		f := s.Fork(open())
		if err := f.Mark(step.Commit, v); err != nil {
			t.Fatal(err)
		}
		predicted, err := f.Next()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Mark(step.Commit, v); err != nil {
			t.Fatal(err)
		}
		actual, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if predicted.Kind != actual.Kind || predicted.Commit != actual.Commit {
			t.Errorf("after %v: fork says %v %s, the session %v %s", v, predicted.Kind, predicted.Commit, actual.Kind, actual.Commit)
		}
	}
}
