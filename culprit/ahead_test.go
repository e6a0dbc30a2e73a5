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
			predicted = s.Ahead(step, 1)
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

// TestAheadWithMoreSlotsLooksTwoVerdictsAhead: with 6 slots Ahead names
// the kernels of the next two verdicts, nearest first: its first kernels
// are those of one slot, and a kernel the search boots for the first time
// was among the predictions made two boots before on most steps of a real
// search, so a build server's spare slots start its build a whole boot
// earlier. (A kernel booted before is in the cache: it needs no build.)
func TestAheadWithMoreSlotsLooksTwoVerdictsAhead(t *testing.T) {
	fresh, hits, most := 0, 0, 0
	for seed := uint64(1); seed <= 6; seed++ {
		d, c := Chain(300), int(seed*53)%300
		if seed%2 == 0 {
			d, c = mustDAG(t, mergeRange), int(seed)%10
		}
		l := newLab(t, seed, d, c)
		s := l.calibrated(Options{})
		type kernel struct {
			commit   int
			reverted bool
		}
		booted := map[kernel]bool{}
		var older, last []Step // predicted two boots ago, one boot ago
		for range 5000 {
			step := s.Next()
			if step.Kind != Measure {
				break
			}
			k := kernel{step.Commit, step.Reverted}
			if older != nil && !booted[k] {
				fresh++
				if slices.ContainsFunc(older, func(p Step) bool { return p.Commit == step.Commit && p.Reverted == step.Reverted }) {
					hits++
				}
			}
			booted[k] = true
			one, six := s.Ahead(step, 1), s.Ahead(step, 6)
			if len(six) < len(one) || len(one) > 0 && !reflect.DeepEqual(six[:len(one)], one) {
				t.Fatalf("seed %d: with 6 slots Ahead of %+v begins %+v, with one it is %+v", seed, step, six, one)
			}
			most = max(most, len(six))
			if len(six) > 6 {
				t.Fatalf("seed %d: two verdicts ahead are at most 6 kernels, Ahead names %d", seed, len(six))
			}
			older, last = last, six
			l.measure(s, step)
		}
		if end := s.Next(); end.Kind != Found || end.Commit != c {
			t.Errorf("seed %d: ended %v at %d, the culprit is %d", seed, end.Kind, end.Commit, c)
		}
	}
	rate := float64(hits) / float64(fresh)
	t.Logf("a kernel booted for the first time was among 6 slots' predictions two boots before on %d of %d (%.0f%%); at most %d kernels", hits, fresh, 100*rate, most)
	if rate < 0.6 || most < 4 {
		t.Errorf("a new kernel was predicted two boots before on %d of %d, want at least 60%%; at most %d kernels, want 4 or more", hits, fresh, most)
	}
}
