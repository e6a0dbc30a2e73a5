package culprit

import (
	"math"
	"testing"
)

// boot8 is a boot of eight samples whose logs' mean is level and whose
// spread within the boot is about 0.2.
func boot8(level float64) []float64 {
	out := make([]float64, 0, 8)
	for _, z := range []float64{-1.5, -1, -0.5, -0.1, 0.1, 0.5, 1, 1.5} {
		out = append(out, math.Exp(level+0.2*z/1.05))
	}
	return out
}

// scatteredParent is a search of 7 → 15 µs over 100 commits whose good
// endpoint and commit 49 (the parent of candidate 50) each had four
// boots of eight samples, their levels scattered ±0.1–0.2 (log) about
// the good level and about the good level plus up: the boots' own spread
// (about 0.17) is beyond half a step's share, where one standard error
// is about 0.13.
func scatteredParent(t *testing.T, up float64) *Search {
	t.Helper()
	m := Model{Good: goodLevel, Bad: badLevel, BootSpread: 0.05, Spread: 0.2, BadBoots: 0.05, SpikesGood: 0.05, SpikesBad: 0.05, Nu: 4}
	s, err := New(Chain(100), m, Options{Confidence: 0.99})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []float64{-0.2, 0.2, -0.1, 0.1} {
		s.ObserveAt(GoodEndpoint, boot8(goodLevel+e))
		s.ObserveAt(99, boot8(badLevel+e))
	}
	for _, e := range []float64{0.2, -0.2, 0.1, -0.1} {
		s.Observe(Step{Kind: Measure, Commit: 49, Confirming: true}, boot8(goodLevel+up+e))
	}
	return s
}

// TestAParentHalfAShareUpIsNotRuledOutByItsScatter: the parent's four
// boots put it 0.1 (log, 11 %) above the good endpoint's four, which is
// more than half a step's share of 7 → 15 µs (0.076) but, as the boots
// scatter, under a standard error from it. Eight boots between the two,
// fewer than stepKnown: too few to tell a step from none, and the
// confirmation must boot them again, not rule the step out. Before, a parent under a standard error from the good endpoint was
// ruled out whatever its distance, and a first step to 8.5 µs whose
// parent's first boots scattered so was passed over: 3 runs of 100
// (`kbisect simulate --seed 13 --first-step 8.5us`) named the later step
// at 1.0000 after 35–39 boots. A parent 0.03 up, as scattered, is ruled
// out at once.
func TestAParentHalfAShareUpIsNotRuledOutByItsScatter(t *testing.T) {
	s := scatteredParent(t, 0.1)
	d, tt, short, sharp := s.stepFrom(kernel{commit: 49}, kernel{commit: GoodEndpoint})
	if sharp || tt >= stepMaybe || short <= 0 || math.Abs(d-0.1) > 0.01 {
		t.Fatalf("the case is not the one meant: d %.3f, %.2f standard errors, %.2f short of a share, sharp %v", d, tt, short, sharp)
	}
	why, parent, tv := s.earlierStep(50)
	if why == "" || parent != 49 || tv != stepMaybe {
		t.Fatalf("earlierStep(50) = %q, %d, %.2f: want fresh boots of parent 49 asked for (t %v)", why, parent, tv, stepMaybe)
	}
	near := scatteredParent(t, 0.03)
	if why, _, _ := near.earlierStep(50); why != "" {
		t.Fatalf("a parent 0.03 above the good endpoint: %q, want no earlier step", why)
	}
}

// TestNoEarlierStepRules: each rule of noEarlierStep, on 7 → 15 µs
// (span 0.76: a share 0.15, half a share 0.076).
func TestNoEarlierStepRules(t *testing.T) {
	span := badLevel - goodLevel
	for _, c := range []struct {
		what         string
		up, t, short float64
		sharp        bool
		boots        int
		out          bool
	}{
		{"below the good endpoint", -0.05, 2, 3, true, 20, true},
		{"sharp, two standard errors short of a share", 0.02, 0.5, 2.5, true, 8, true},
		{"sharp, under two short", 0.1, 3, 1.5, true, 20, false},
		{"not sharp, more than one short", 0.05, 0.5, 1.2, false, 8, true},
		{"not sharp, a standard error away", 0.1, 1.2, 0.5, false, 8, false},
		{"not sharp, under one away, few boots, half a share up", 0.1, 0.8, 0.4, false, 8, false},
		{"not sharp, under one away, few boots, under half a share", 0.05, 0.8, 0.9, false, 8, true},
		{"not sharp, under one away, enough boots", 0.1, 0.8, 0.4, false, stepKnown, true},
		{"sharp, two short of a share but three away and half a share up", 0.12, 3.2, 2.2, true, 40, false},
		{"sharp, two short of a share, three away, under half a share up", 0.07, 3.2, 2.2, true, 40, true},
	} {
		if got := noEarlierStep(c.up, c.up, c.t, c.short, c.sharp, c.boots, span); got != c.out {
			t.Errorf("%s: ruled out %v, want %v", c.what, got, c.out)
		}
	}
}

// TestAParentAShareUpByItsMedianIsNotRuledOutByItsMean: one far-off boot
// (two samples kept of three, 0.49 below the parent's others) made the
// boots' levels scatter as if the machine's boots wandered and pulled
// the parent's weighed mean to under a standard error from the good
// endpoint, while the median of its boots sat a step's share up: from
// stepKnown boots such a parent was ruled out, and run 126 of `kbisect
// simulate --seed 1 --first-step 9us` named the later step at 1.0000
// (at its first review the mean sat below the good endpoint). A parent
// whose median sits a share up is booted again; under a share (with
// enough boots), or under half a share (with few), it is ruled out as
// before.
func TestAParentAShareUpByItsMedianIsNotRuledOutByItsMean(t *testing.T) {
	span := badLevel - goodLevel // a share 0.15
	for _, c := range []struct {
		what       string
		up, med, t float64
		short      float64
		boots      int
		out        bool
	}{
		{"enough boots, the mean under one away, the median a share up", 0.09, 0.16, 0.95, 0.3, 12, false},
		{"enough boots, the mean under one away, the median under a share", 0.09, 0.12, 0.95, 0.3, 12, true},
		{"few boots, the mean below, the median half a share up", -0.01, 0.1, 0.1, 1.5, 8, false},
		{"few boots, the mean below, the median under half a share", -0.01, 0.05, 0.1, 1.5, 8, true},
		{"enough boots, the mean below", -0.01, 0.16, 0.1, 1.5, stepKnown, true},
	} {
		if got := noEarlierStep(c.up, c.med, c.t, c.short, false, c.boots, span); got != c.out {
			t.Errorf("%s: ruled out %v, want %v", c.what, got, c.out)
		}
	}
	// Where the regression is too small for steps to be told (a spike
	// share's, 7 vs 8.4 µs), the median rules do not act: on `--spikes-bad
	// 50%` (seed 13) they cost 10 % more boots for nothing.
	small := minStepSpan / 2
	if !noEarlierStep(-0.01, small, 0, 0, false, 8, small) || !noEarlierStep(0.01, small, 0, 0, false, stepKnown, small) {
		t.Error("a regression too small for steps: a parent whose median sits up was not ruled out")
	}
}

// TestAParentFarAboveButShortOfAShareIsAStep: a parent beyond doubt
// above the good endpoint (4.5 standard errors or more) and half a
// step's share up or more is an earlier step even while it is short of a
// whole share — the second search below it tells whether one is there —
// and is not ruled out for falling two standard errors short of a share
// (7 → 8 → 15 µs: the parent 0.134 up, a share 0.13–0.15 of the
// model's way; ruled out so, 9 runs of 100 named the later step).
func TestAParentFarAboveButShortOfAShareIsAStep(t *testing.T) {
	m := Model{Good: goodLevel, Bad: badLevel, BootSpread: 0.02, Spread: 0.2, Nu: 4}
	s, err := New(Chain(100), m, Options{Confidence: 0.99})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 32; i++ {
		e := 0.01 * float64(i%5-2)
		s.ObserveAt(GoodEndpoint, boot8(goodLevel+e))
		s.ObserveAt(99, boot8(badLevel+e))
		s.Observe(Step{Kind: Measure, Commit: 49, Confirming: true}, boot8(goodLevel+0.1+e))
	}
	d, tt, short, sharp := s.stepFrom(kernel{commit: 49}, kernel{commit: GoodEndpoint})
	if !sharp || tt < stepT || short <= stepClear || math.Abs(d-0.1) > 0.01 {
		t.Fatalf("the case is not the one meant: d %.3f, %.2f standard errors, %.2f short of a share, sharp %v", d, tt, short, sharp)
	}
	why, parent, tv := s.earlierStep(50)
	if why == "" || parent != 49 || tv < stepT {
		t.Fatalf("earlierStep(50) = %q, %d, %.2f: want parent 49 an earlier step beyond doubt (t ≥ %v)", why, parent, tv, stepT)
	}
}
