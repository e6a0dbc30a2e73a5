package culprit

import (
	"math"
	"testing"
)

// mergeRange is a mainline 0–2 with a side branch 3–5 forked from 0,
// merged by 7 (parents 6 and 5), and 8–9 after it:
//
//	0 ─ 1 ─ 2 ─── 6 ─ 7 ─ 8 ─ 9
//	 \               /
//	  3 ─── 4 ─── 5
var mergeRange = [][]int{{}, {0}, {1}, {0}, {3}, {4}, {2}, {6, 5}, {7}, {8}}

// firstParents are mergeRange's first-parent commits from 0 to the bad
// endpoint: what a caller bisecting only first parents passes as a chain.
var firstParents = []int{0, 1, 2, 6, 7, 8, 9}

const seeds = 3

// assertFound fails unless the search ended naming culprit at the
// confidence, and the confirmation measured it after it led.
func assertFound(t *testing.T, l *lab, s *Search, end Step, culprit int) {
	t.Helper()
	assertProbabilities(t, s)
	if end.Kind != Found || end.Commit != culprit {
		t.Fatalf("the search ended %v at %d (%s), candidates %v; want %d found", end.Kind, end.Commit, end.Reason, end.Candidates, culprit)
	}
	if end.Probability < 0.99 {
		t.Fatalf("found %d at probability %g; want at least 0.99", culprit, end.Probability)
	}
	if pc, _ := s.Probabilities(); pc[culprit] != end.Probability {
		t.Fatalf("Found says %g, Probabilities %g", end.Probability, pc[culprit])
	}
	// Fresh boots are those since the confirmation began: of the
	// candidate, its parents or its revert, whether Next asked for them
	// to confirm or to settle a doubt the confirmation raised.
	parents := l.d.Parents(culprit)
	begun := -1
	for i, st := range l.steps {
		if st.Confirming && (st.Commit == culprit || contains(parents, st.Commit)) {
			begun = i
			break
		}
	}
	if begun < 0 {
		t.Fatalf("found %d without confirming it", culprit)
	}
	fresh := map[int]int{}
	for _, st := range l.steps[begun:] {
		if !st.Reverted {
			fresh[st.Commit]++
		}
	}
	for _, x := range append(parents, culprit) {
		if !l.unbuildable[x] && fresh[x] < 2 {
			t.Fatalf("found %d after %d fresh boots of %d; want 2", culprit, fresh[x], x)
		}
	}
}

func TestSearchFindsTheCulpritOfSmallRanges(t *testing.T) {
	chain := Chain(20)
	for _, c := range []struct {
		name    string
		d       *DAG
		culprit int
		revert  bool
		fitted  bool
	}{
		{"chain", chain, 11, false, true},
		{"chain with reverts", chain, 6, true, false},
		{"chain, first commit", chain, 0, false, false},
		{"chain, bad endpoint", chain, 19, true, true},
		{"side branch of a merge", mustDAG(t, mergeRange), 4, false, true},
		{"side branch, reverts", mustDAG(t, mergeRange), 3, true, false},
		{"the merge", mustDAG(t, mergeRange), 7, true, true},
		{"merge range, first commit", mustDAG(t, mergeRange), 0, false, false},
		{"merge range, bad endpoint", mustDAG(t, mergeRange), 9, false, true},
		{"side branch from before the range", mustDAG(t, [][]int{{}, {0}, {1}, {}, {3}, {4}, {2, 5}, {6}}), 4, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			for seed := uint64(1); seed <= seeds; seed++ {
				l := newLab(t, seed, c.d, c.culprit)
				opt := Options{Revert: c.revert}
				var s *Search
				if c.fitted {
					s = l.calibrated(opt)
				} else {
					s = newSearch(t, c.d, opt)
				}
				end := l.run(s)
				assertFound(t, l, s, end, c.culprit)
				if c.revert && c.culprit != c.d.Len()-1 && l.asked[target{commit: c.culprit, reverted: true}] < 2 {
					t.Fatalf("seed %d: the revert of %d had %d boots; want 2 in confirmation", seed, c.culprit, l.asked[target{commit: c.culprit, reverted: true}])
				}
			}
		})
	}
}

// A caller that bisects first parents only passes them as a chain: the
// merge that brought a side branch's culprit in is then the first bad
// commit.
func TestSearchOverFirstParentsNamesTheMerge(t *testing.T) {
	full := mustDAG(t, mergeRange)
	for _, sideCulprit := range []int{3, 4, 5} {
		for seed := uint64(1); seed <= seeds; seed++ {
			d := Chain(len(firstParents))
			l := newLab(t, seed, d, 4) // the merge, 7, is the fifth first parent
			l.side = func(step Step, _ bool) bool {
				x := firstParents[step.Commit]
				if step.Reverted {
					// Reverting the merge drops the side branch.
					return x != 7 && full.IsAncestor(sideCulprit, 9)
				}
				return full.IsAncestor(sideCulprit, x)
			}
			s := newSearch(t, d, Options{Revert: true})
			assertFound(t, l, s, l.run(s), 4)
		}
	}
}

// Boots land on the wrong side as often as the model allows (one in
// twenty) and scatter more than the constructed model's: the search,
// calibrated on the endpoints, still names the culprit.
func TestSearchFindsTheCulpritDespiteWrongSideBoots(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		d, c := Chain(32), int(seed*7)%32
		if seed%2 == 0 {
			d, c = mustDAG(t, mergeRange), int(seed)%10
		}
		l := newLab(t, seed, d, c)
		l.bootSpread, l.spread = 0.08, 0.15
		wrong := 0
		l.side = func(_ Step, bad bool) bool {
			if l.rng.Float64() < 0.05 {
				wrong++
				return !bad
			}
			return bad
		}
		s := l.calibrated(Options{Revert: seed%3 == 0})
		assertFound(t, l, s, l.run(s), c)
		t.Logf("seed %d: %d found after %d boots, %d on the wrong side", seed, c, s.Boots(), wrong)
	}
}

// Costs steer the choice: while builds are cheap the search builds the
// commit that halves what is left; once the lab says a build costs days,
// a boot of the kernel it has built is worth more than any new build.
func TestSetCostsSteersTheChoiceTowardBuiltKernels(t *testing.T) {
	d := Chain(64)
	s := newSearch(t, d, Options{Costs: Costs{Build: 1, Boot: 60, Sample: 10}})
	first := s.Next()
	if first.Kind != Measure {
		t.Fatalf("first step %v, want a measurement", first.Kind)
	}
	good := math.Exp(goodLevel)
	s.Observe(first, []float64{good, good, good})
	cheap := s.Next()
	if cheap.Commit == first.Commit {
		t.Fatalf("with cheap builds the search booted %d again; want a new commit", first.Commit)
	}
	s.SetCosts(Costs{Build: 1e6, Boot: 60, Sample: 10})
	dear := s.Next()
	if dear.Commit != first.Commit {
		t.Fatalf("with builds at 1e6 s the search chose %d, not the built %d", dear.Commit, first.Commit)
	}
}
