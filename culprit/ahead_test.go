package culprit

import (
	"reflect"
	"slices"
	"testing"
)

// TestAheadPredictsTheNextStepWithoutChangingTheSearch: what Ahead says
// may come after a boot is what Next asks for after it on most steps of
// a real search (so a kernel built ahead is waiting when it is needed),
// never the boot itself, and asking changes nothing of the search: the
// same boots give the same search with or without it.
func TestAheadPredictsTheNextStepWithoutChangingTheSearch(t *testing.T) {
	steps, hits, both := 0, 0, 0
	for seed := uint64(1); seed <= 8; seed++ {
		d, c := Chain(200), int(seed*37)%200
		if seed%2 == 0 {
			d, c = mustDAG(t, mergeRange), int(seed)%10
		}
		l := newLab(t, seed, d, c)
		s := l.calibrated(Options{Revert: seed%3 == 0})
		twin := newLab(t, seed, d, c)
		plain := twin.calibrated(Options{Revert: seed%3 == 0})
		var predicted []Step
		for range 5000 {
			step := s.Next()
			if want := plain.Next(); !reflect.DeepEqual(step, want) {
				t.Fatalf("seed %d: after Ahead the search asks for %+v, without it %+v", seed, step, want)
			}
			if predicted != nil {
				steps++
				if slices.ContainsFunc(predicted, func(p Step) bool { return p.Commit == step.Commit && p.Reverted == step.Reverted }) {
					hits++
				}
			}
			if step.Kind != Measure {
				break
			}
			before := s.Log()
			probs, none := s.Probabilities()
			predicted = s.Ahead(step)
			if len(predicted) == 2 {
				both++
			}
			for _, p := range predicted {
				if p.Kind != Measure || p.Commit == step.Commit && p.Reverted == step.Reverted {
					t.Fatalf("seed %d: Ahead of %+v predicts %+v", seed, step, p)
				}
			}
			after, none2 := s.Probabilities()
			if !reflect.DeepEqual(before, s.Log()) || !slices.Equal(probs, after) || none != none2 {
				t.Fatalf("seed %d: Ahead changed the search", seed)
			}
			l.measure(s, step)
			twin.measure(plain, step)
		}
		if end := s.Next(); end.Kind != Found || end.Commit != c {
			t.Errorf("seed %d: ended %v at %d, the culprit is %d", seed, end.Kind, end.Commit, c)
		}
	}
	rate := float64(hits) / float64(steps)
	t.Logf("the next step was predicted on %d of %d steps (%.0f%%); two predictions on %d", hits, steps, 100*rate, both)
	if rate < 0.6 {
		t.Errorf("the next step was predicted on %d of %d steps, want at least 60%%", hits, steps)
	}
}
