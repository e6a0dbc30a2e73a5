package culprit

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Levels of the synthetic kernels: a good one runs at about 7,000, a bad
// one at about 15,000.
var (
	goodLevel = math.Log(7000)
	badLevel  = math.Log(15000)
)

// testModel is a model constructed directly, as a caller that learned it
// elsewhere would pass it: New prepares its constants.
func testModel() Model {
	return Model{Good: goodLevel, Bad: badLevel, BootSpread: 0.05, Spread: 0.1,
		BadBoots: 0.05, SpikesGood: 0.05, SpikesBad: 0.05, Nu: 4}
}

// lab boots the commits of a range whose culprit the test knows: a
// commit is bad when the culprit is it or one of its ancestors, the bad
// endpoint with a commit reverted is bad unless that commit is the
// culprit. Culprit −1 is "none": every kernel is good.
type lab struct {
	t       testing.TB
	rng     *rand.Rand
	d       *DAG
	culprit int
	// bootSpread and spread are how the lab's boots scatter, in log units:
	// more with each seed (modulo 4), to 0.09 and 0.2.
	bootSpread, spread float64
	// unbuildable commits are skipped when asked for.
	unbuildable map[int]bool
	// side, when set, decides a boot's level instead of the truth: it
	// gets the step and the truth, and says whether the boot is bad.
	side func(step Step, bad bool) bool
	// asked counts the steps measured, per kernel.
	asked map[target]int
	steps []Step
	// model is the model calibrated learned and started the search with.
	model Model
}

func newLab(t testing.TB, seed uint64, d *DAG, culprit int) *lab {
	return &lab{t: t, rng: rand.New(rand.NewPCG(seed, 0x6b62)), d: d, culprit: culprit,
		bootSpread: 0.03 + 0.02*float64(seed%4), spread: 0.05 + 0.05*float64(seed%4), unbuildable: map[int]bool{}, asked: map[target]int{}}
}

// isBad is the truth of what step asks to measure.
func (l *lab) isBad(step Step) bool {
	switch {
	case l.culprit < 0 || step.Commit == GoodEndpoint:
		return false
	case step.Reverted:
		return step.Commit != l.culprit
	}
	return l.d.IsAncestor(l.culprit, step.Commit)
}

// boot gives one boot's samples, as many as the search wants.
func (l *lab) boot(s *Search, bad bool) []float64 {
	level := goodLevel
	if bad {
		level = badLevel
	}
	level += l.bootSpread * l.rng.NormFloat64()
	var xs []float64
	for len(xs) == 0 || s.More(xs) {
		xs = append(xs, math.Exp(level+l.spread*l.rng.NormFloat64()))
		if len(xs) > 1000 {
			l.t.Fatalf("More still asks for samples after %d", len(xs))
		}
	}
	return xs
}

// endpointBoots are n boots of a kernel on one side, of k samples each.
func (l *lab) endpointBoots(bad bool, n, k int) [][]float64 {
	level := goodLevel
	if bad {
		level = badLevel
	}
	out := make([][]float64, n)
	for i := range out {
		lv := level + l.bootSpread*l.rng.NormFloat64()
		for j := 0; j < k; j++ {
			out[i] = append(out[i], math.Exp(lv+l.spread*l.rng.NormFloat64()))
		}
	}
	return out
}

// measure does what step asks: a boot, or a skip for what cannot be
// built.
func (l *lab) measure(s *Search, step Step) {
	if !step.Reverted && step.Commit >= 0 && l.unbuildable[step.Commit] {
		s.Skip(step)
		return
	}
	bad := l.isBad(step)
	if l.side != nil && step.Commit != GoodEndpoint {
		bad = l.side(step, bad)
	}
	l.asked[target{commit: step.Commit, reverted: step.Reverted}]++
	l.steps = append(l.steps, step)
	s.Observe(step, l.boot(s, bad))
}

// run drives the search until it ends, as a caller does, and returns
// its last step.
func (l *lab) run(s *Search) Step {
	for i := 0; i < 5000; i++ {
		step := s.Next()
		if step.Kind != Measure {
			return step
		}
		if step.Commit < GoodEndpoint || step.Commit >= l.d.Len() {
			l.t.Fatalf("Next asks for commit %d of a range of %d", step.Commit, l.d.Len())
		}
		l.measure(s, step)
	}
	l.t.Fatalf("the search did not end after 5000 steps (%d boots)", s.Boots())
	return Step{}
}

// calibrated learns the model from the lab's endpoints as a caller does,
// boot by boot until Calibrate wants no more, and starts a search with
// the bad endpoint's boots taken in.
func (l *lab) calibrated(opt Options) *Search {
	l.t.Helper()
	var goods, bads [][]float64
	for {
		m, more, err := Calibrate(goods, bads, 5, FitOptions{})
		if !more {
			if err != nil {
				l.t.Fatalf("calibration: %v", err)
			}
			s, err := New(l.d, m, opt)
			if err != nil {
				l.t.Fatalf("New: %v", err)
			}
			l.model = m
			for i := range bads {
				s.ObserveAt(l.d.Len()-1, bads[i])
				s.ObserveAt(GoodEndpoint, goods[i])
			}
			return s
		}
		goods = append(goods, l.endpointBoots(false, 1, 5)...)
		bads = append(bads, l.endpointBoots(true, 1, 5)...)
	}
}

// newSearch starts a search under the constructed test model.
func newSearch(t testing.TB, d *DAG, opt Options) *Search {
	t.Helper()
	s, err := New(d, testModel(), opt)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func mustDAG(t testing.TB, parents [][]int) *DAG {
	t.Helper()
	d, err := NewDAG(parents)
	if err != nil {
		t.Fatalf("NewDAG: %v", err)
	}
	return d
}

// assertProbabilities fails on a probability that is not one, or
// probabilities that do not sum to one.
func assertProbabilities(t testing.TB, s *Search) {
	t.Helper()
	pc, none := s.Probabilities()
	sum := 0.0
	for i, p := range append(pc, none) {
		if math.IsNaN(p) || p < 0 || p > 1 {
			t.Fatalf("probability %d is %g", i, p)
		}
		sum += p
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Fatalf("the probabilities sum to %g", sum)
	}
}
