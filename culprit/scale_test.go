package culprit

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bigSearch is a search over a chain of n commits, culprit c, that has
// taken in boots of random commits, one in ten on the wrong side.
func bigSearch(tb testing.TB, n, c, boots int) (*Search, *lab) {
	d := Chain(n)
	l := newLab(tb, 11, d, c)
	s := newSearch(tb, d, Options{MaxBoots: 400})
	for i := 0; i < boots; i++ {
		x := l.rng.IntN(n)
		if i%3 == 0 {
			x = c - 50 + l.rng.IntN(100) // most evidence near the culprit
		}
		bad := l.isBad(Step{Commit: x})
		if i%10 == 9 {
			bad = !bad
		}
		s.ObserveAt(x, l.boot(s, bad))
	}
	return s, l
}

func TestSearchOnTenThousandCommits(t *testing.T) {
	const n, c = 10000, 6173
	s, l := bigSearch(t, n, c, 100)
	assertProbabilities(t, s)
	step := s.Next()
	if step.Kind != Measure || step.Commit < GoodEndpoint || step.Commit >= n {
		t.Fatalf("after 100 boots Next says %+v", step)
	}
	pc, _ := s.Probabilities()
	if pc[c] < 1e-3 {
		t.Fatalf("the culprit is at %g after 100 boots, a tenth of them wrong", pc[c])
	}
	end := l.run(s)
	assertProbabilities(t, s)
	if end.Kind != Found || end.Commit != c {
		t.Fatalf("the search ended %v at %d (%s); want %d found", end.Kind, end.Commit, end.Reason, c)
	}

	// Boots that pile up at one commit do not overflow the posterior.
	for i := 0; i < 400; i++ {
		s.ObserveAt(n-1, l.boot(s, true))
		s.ObserveAt(c-1, l.boot(s, false))
	}
	assertProbabilities(t, s)
	if pc, _ := s.Probabilities(); !(pc[c] > 0.5) || math.IsNaN(pc[c]) {
		t.Fatalf("after 800 more boots the culprit is at %g", pc[c])
	}
}

func TestSearchOnAThousandCommitsWithMerges(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 2))
	parents := randomParents(rng, 1000)
	d := mustDAG(t, parents)
	c := 700
	for len(ancestorsByBFS(parents, c)) < 100 {
		c++ // a culprit with some history, so that it is not found at once
	}
	l := newLab(t, 11, d, c)
	s := newSearch(t, d, Options{})
	end := l.run(s)
	assertProbabilities(t, s)
	assertFound(t, l, s, end, c)
}

func BenchmarkNextOn10000Commits(b *testing.B) {
	s, _ := bigSearch(b, 10000, 6173, 100)
	for b.Loop() {
		if step := s.Next(); step.Kind != Measure {
			b.Fatalf("Next says %+v", step)
		}
	}
}
