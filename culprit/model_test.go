package culprit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

// levelBoot is one boot of k samples at a level (log units), the boot's
// own level off by bootSpread and each sample by spread.
func levelBoot(rng *rand.Rand, level, bootSpread, spread float64, k int) []float64 {
	lv := level + bootSpread*rng.NormFloat64()
	out := make([]float64, k)
	for i := range out {
		out[i] = math.Exp(lv + spread*rng.NormFloat64())
	}
	return out
}

func TestEvidenceIsBoundedByTheCapWhateverTheSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 1))
	absurd := []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1), 5e-324, 1e-300, 1e300,
		math.MaxFloat64, 1, 7000, 15000, 7000 * 200}
	models := []Model{testModel(),
		{Good: goodLevel, Bad: badLevel, BootSpread: 0.03, Spread: 0.05, BadBoots: 0.05, SpikesGood: minSpikes, SpikesBad: minSpikes, Nu: 4},
		{Good: 0, Bad: 0.01, BootSpread: 1, Spread: 2, BadBoots: 0.3, Shows: 0.45, SpikesGood: 0.4, SpikesBad: 0.4, Nu: 1}}
	for mi, m := range models {
		cap := m.filled().capOf(5)
		for trial := 0; trial < 300; trial++ {
			n := rng.IntN(40)
			xs := make([]float64, n)
			for i := range xs {
				switch rng.IntN(3) {
				case 0:
					xs[i] = absurd[rng.IntN(len(absurd))]
				case 1:
					xs[i] = math.Exp(rng.NormFloat64() * 50)
				default:
					xs[i] = math.Exp(goodLevel + (badLevel-goodLevel)*rng.Float64())
				}
			}
			e := m.Evidence(xs)
			if math.IsNaN(e) || math.Abs(e) > cap+1e-9 {
				t.Fatalf("model %d: Evidence(%v) = %g, outside ±%g", mi, xs, e, cap)
			}
		}
	}
	if e := testModel().Evidence(nil); e != 0 {
		t.Errorf("a boot without samples has evidence %g, want 0", e)
	}
	if e := testModel().Evidence([]float64{0, -3, math.NaN()}); e != 0 {
		t.Errorf("a boot without one valid sample has evidence %g, want 0", e)
	}
}

func TestEvidenceReachesTheCapOnEachSide(t *testing.T) {
	m := testModel()
	rng := rand.New(rand.NewPCG(5, 2))
	for i := 0; i < 20; i++ {
		g := m.Evidence(levelBoot(rng, goodLevel, 0.05, 0.1, 5))
		b := m.Evidence(levelBoot(rng, badLevel, 0.05, 0.1, 5))
		if !(g < -0.9*m.Cap() && b > 0.9*m.Cap()) {
			t.Fatalf("a good boot says %g and a bad one %g; want near ∓%g", g, b, m.Cap())
		}
	}
	mid := math.Exp((goodLevel + badLevel) / 2)
	if e := m.Evidence([]float64{mid, mid, mid}); math.Abs(e) > 0.1*m.Cap() {
		t.Errorf("a boot halfway between the levels says %g; want about 0", e)
	}
}

func TestASpikeDoesNotTurnAGoodBootBad(t *testing.T) {
	m := testModel()
	rng := rand.New(rand.NewPCG(5, 3))
	for i := 0; i < 50; i++ {
		xs := levelBoot(rng, goodLevel, 0.05, 0.1, 5)
		xs[rng.IntN(5)] *= 200
		if e := m.Evidence(xs); !(e < -0.5*m.Cap()) {
			t.Fatalf("a good boot with one 200× spike %v says %g; want clearly good (below %g)", xs, e, -0.5*m.Cap())
		}
		ys := levelBoot(rng, badLevel, 0.05, 0.1, 5)
		ys[rng.IntN(5)] /= 200
		if e := m.Evidence(ys); !(e > 0.5*m.Cap()) {
			t.Fatalf("a bad boot with one dip to 1/200 %v says %g; want clearly bad", ys, e)
		}
	}
}

func TestEvidenceSaturatesWithSamples(t *testing.T) {
	m := testModel()
	rng := rand.New(rand.NewPCG(5, 4))
	for _, level := range []float64{goodLevel, badLevel} {
		for i := 0; i < 10; i++ {
			many := levelBoot(rng, level, 0.05, 0.1, 100)
			e10, e100 := math.Abs(m.Evidence(many[:10])), math.Abs(m.Evidence(many))
			if e100 > m.Cap()+1e-9 || e100 > e10+0.05*m.Cap() {
				t.Fatalf("100 samples say %g, 10 say %g: more than a little more (cap %g)", e100, e10, m.Cap())
			}
			if e10 < 0.9*m.Cap() {
				t.Fatalf("10 samples of a clear boot say only %g (cap %g)", e10, m.Cap())
			}
		}
	}
	// A boot near the middle stays unsure however many samples it has:
	// its level, not its samples, is what is uncertain.
	mid := (goodLevel + badLevel) / 2
	xs := make([]float64, 1000)
	for i := range xs {
		xs[i] = math.Exp(mid + 0.1*rng.NormFloat64())
	}
	if e := m.Evidence(xs); math.Abs(e) > 0.5*m.Cap() {
		t.Errorf("1,000 samples halfway say %g; want unsure", e)
	}
}

func TestFitRecoversLevelsAndSpreads(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	const good, bad, bootSpread, spread = 8.5, 9.3, 0.08, 0.12
	var goods, bads [][]float64
	for i := 0; i < 60; i++ {
		goods = append(goods, levelBoot(rng, good, bootSpread, spread, 12))
		bads = append(bads, levelBoot(rng, bad, bootSpread, spread, 12))
	}
	m, err := Fit(goods, bads, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(m.Good-good) > 0.03 || math.Abs(m.Bad-bad) > 0.03 {
		t.Errorf("levels %g, %g; want %g, %g", m.Good, m.Bad, good, bad)
	}
	if math.Abs(m.Spread-spread) > 0.15*spread {
		t.Errorf("spread %g; want %g", m.Spread, spread)
	}
	if math.Abs(m.BootSpread-bootSpread) > 0.3*bootSpread {
		t.Errorf("boot spread %g; want %g", m.BootSpread, bootSpread)
	}
	if m.BadBoots > 0.05 || m.Shows < 0.95 || m.Nu != defaultNu || m.SpikesGood > 0.03 || m.SpikesBad > 0.03 {
		t.Errorf("shares: wrong side %g, shows %g, spikes %g and %g, ν %g; want about the floors", m.BadBoots, m.Shows, m.SpikesGood, m.SpikesBad, m.Nu)
	}
	if err := m.Validate(); err != nil {
		t.Error(err)
	}
	// A boot on the wrong side does not move the levels.
	goods[0] = levelBoot(rng, bad, 0, spread, 12)
	m2, err := Fit(goods, bads, FitOptions{BadBoots: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(m2.Good-m.Good) > 0.01 || m2.BadBoots != 0.1 {
		t.Errorf("one wrong boot moved the good level from %g to %g (bad boots %g)", m.Good, m2.Good, m2.BadBoots)
	}
}

func TestFitRefusesWhatItCannotLearnFrom(t *testing.T) {
	b := [][]float64{{7000, 7100}}
	for name, c := range map[string]struct {
		good, bad [][]float64
		opt       FitOptions
	}{
		"no good boots":     {nil, b, FitOptions{}},
		"no bad boots":      {b, nil, FitOptions{}},
		"only empty boots":  {[][]float64{{}}, b, FitOptions{}},
		"a zero sample":     {[][]float64{{7000, 0}}, b, FitOptions{}},
		"an infinite one":   {b, [][]float64{{math.Inf(1)}}, FitOptions{}},
		"half boots wrong":  {b, b, FitOptions{BadBoots: 0.5}},
		"a negative sample": {b, [][]float64{{-15000}}, FitOptions{}},
	} {
		if _, err := Fit(c.good, c.bad, c.opt); err == nil {
			t.Errorf("%s: Fit took it", name)
		}
	}
}

func TestCalibrateAsksForMoreBootsWhenOneSitsOnTheWrongSide(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var goods, bads [][]float64
	for i := 0; i < 2; i++ {
		goods = append(goods, levelBoot(rng, goodLevel, 0.05, 0.1, 5))
		bads = append(bads, levelBoot(rng, badLevel, 0.05, 0.1, 5))
		if _, more, _ := Calibrate(goods, bads, 5, FitOptions{}); !more {
			t.Fatalf("%d boots each: Calibrate wants no more", i+1)
		}
	}
	goods = append(goods, levelBoot(rng, goodLevel, 0.05, 0.1, 5))
	bads = append(bads, levelBoot(rng, badLevel, 0.05, 0.1, 5))
	m, more, err := Calibrate(goods, bads, 5, FitOptions{})
	if more || err != nil {
		t.Fatalf("three clean boots each: more %v, error %v; want a model", more, err)
	}
	if math.Abs(m.Good-goodLevel) > 0.1 || math.Abs(m.Bad-badLevel) > 0.1 {
		t.Fatalf("levels %g, %g; want about %g, %g", m.Good, m.Bad, goodLevel, badLevel)
	}
	// A boot on the wrong side: another boot of each, to learn the
	// levels from more than three.
	clean := func(boots [][]float64) [][]float64 { return append([][]float64(nil), boots...) }
	for name, c := range map[string]struct{ good, bad [][]float64 }{
		"a good boot at the bad level": {append(clean(goods), levelBoot(rng, badLevel, 0, 0.1, 5)),
			append(clean(bads), levelBoot(rng, badLevel, 0.05, 0.1, 5))},
		"a bad boot at the good level": {append(clean(goods), levelBoot(rng, goodLevel, 0.05, 0.1, 5)),
			append(clean(bads), levelBoot(rng, goodLevel, 0, 0.1, 5))},
	} {
		if _, more, err := Calibrate(c.good, c.bad, 5, FitOptions{}); !more || err != nil {
			t.Errorf("%s: more %v, error %v; want more boots", name, more, err)
		}
	}
}

func TestCalibrateSaysNotReproducedWhenTheEndpointsAreAlike(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 7))
	var goods, bads [][]float64
	for i := 0; i < MaxCalibrationBoots; i++ {
		goods = append(goods, levelBoot(rng, goodLevel, 0.05, 0.1, 5))
		bads = append(bads, levelBoot(rng, goodLevel, 0.05, 0.1, 5))
		_, more, err := Calibrate(goods, bads, 5, FitOptions{})
		if i+1 < unsureBoots && !more {
			t.Fatalf("alike after %d boots each: more %v, error %v; want more boots first", i+1, more, err)
		}
		// From twelve boots each, a chance below 1 % that the bad
		// endpoint is worse ends it, as twenty boots do.
		if (i+1 == MaxCalibrationBoots || !more) && (more || err == nil) {
			t.Fatalf("alike after %d boots each: more %v, error %v; want not reproduced", i+1, more, err)
		}
		if !more {
			return
		}
	}
}

// calibrationOf is k boots of each endpoint, n samples each, at levels
// good and bad (log units).
func calibrationOf(rng *rand.Rand, good, bad, bootSpread, spread float64, k, n int) (goods, bads [][]float64) {
	for i := 0; i < k; i++ {
		goods = append(goods, levelBoot(rng, good, bootSpread, spread, n))
		bads = append(bads, levelBoot(rng, bad, bootSpread, spread, n))
	}
	return goods, bads
}

func TestOneSampleBootsTeachNothingOfTheSpreadWithinABoot(t *testing.T) {
	// A search whose boots take one sample each refits its model from
	// them: a lone sample is its own median, and counting its deviation
	// of 0 made the spread within a boot shrink toward nothing, so each
	// later sample said far more than it does.
	rng := rand.New(rand.NewPCG(7, 1))
	const spread, bootSpread = 0.3, 0.05
	goods, bads := calibrationOf(rng, goodLevel, badLevel, bootSpread, spread, 3, 5)
	before, err := Fit(goods, bads, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		goods = append(goods, levelBoot(rng, goodLevel, bootSpread, spread, 1))
		bads = append(bads, levelBoot(rng, badLevel, bootSpread, spread, 1))
	}
	after, err := Fit(goods, bads, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := after.Spread / before.Spread; math.Abs(r-1) > 0.03 {
		t.Errorf("40 one-sample boots of each side moved the spread within a boot from %.3f to %.3f: they say nothing of it", before.Spread, after.Spread)
	}
	// Their scatter is the samples', not the boots': a one-sample boot's
	// median is off by a whole sample's spread.
	if after.BootSpread > 0.15 {
		t.Errorf("boot spread %.3f from one-sample boots whose levels scatter by %.2f: the samples' own spread was taken for the boots'", after.BootSpread, bootSpread)
	}
	// Two samples are each half their difference from their median.
	var twos [][]float64
	for i := 0; i < 200; i++ {
		twos = append(twos, levelBoot(rng, goodLevel, 0, spread, 2))
	}
	m, err := Fit(twos, bads[:3], FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Spread < 0.8*spread || m.Spread > 1.4*spread {
		t.Errorf("two-sample boots of spread %.2f fit a spread of %.3f", spread, m.Spread)
	}
}

func TestTheSpreadWithinABootIsTheSamplesWhateverTheBootsSize(t *testing.T) {
	// A boot's median sits among its own samples: an odd boot's is one
	// of them (a distance of 0), an even boot's lies between the middle
	// two. Pooled as they were, boots of 3 said a spread of 0.3 was 0.14
	// and boots of 5 0.22, so each sample of a refitted search said twice
	// what it does.
	const spread = 0.3
	rng := rand.New(rand.NewPCG(7, 11))
	check := func(name string, sizes ...int) {
		t.Helper()
		var goods, bads [][]float64
		df := 0
		for i := 0; i < 1500; i++ {
			n := sizes[i%len(sizes)]
			goods = append(goods, levelBoot(rng, goodLevel, 0, spread, n))
			bads = append(bads, levelBoot(rng, badLevel, 0, spread, n))
			df += 2 * (n - 1)
		}
		m, err := Fit(goods, bads, FitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Fit raises the estimate to an upper bound for its degrees of
		// freedom: nearly nothing at thousands of them.
		if got := m.Spread / inflation(df); math.Abs(got-spread) > 0.05*spread {
			t.Errorf("%s: boots of spread %.2f fit %.3f", name, spread, got)
		}
	}
	for n := 2; n <= 10; n++ {
		check(fmt.Sprintf("boots of %d", n), n)
	}
	check("boots of 20", 20)
	check("boots of 3 and 5", 3, 5)
	check("boots of 2, 3 and 4", 2, 3, 4)
}

func TestASearchBootStartsWithOneSampleWhereOneIsDecisive(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 2))
	for _, c := range []struct {
		name             string
		good, bad        float64 // µs
		spread           float64
		least, wantLeast int
	}{
		{"the seed report's 3 vs 50 µs", 3, 50, 0.3, 3, 1},
		{"the seed report's 3 µs vs 49 ms", 3, 49000, 0.3, 3, 1},
		{"7 vs 15 µs", 7, 15, 0.2, 3, 3},
		{"7 vs 15 µs, already one", 7, 15, 0.2, 1, 1},
		{"3 vs 50 µs, spread 1", 3, 50, 1, 3, 3},
		{"3 vs 50 µs, 20 % of samples at the other side's level", 3, 50, 0.3, 3, 3},
	} {
		goods, bads := calibrationOf(rng, math.Log(c.good), math.Log(c.bad), 0.05, c.spread, 3, 5)
		if strings.Contains(c.name, "other side's level") {
			flip(rng, goods, bads, 0.2)
		}
		m, err := Fit(goods, bads, FitOptions{})
		if err != nil {
			t.Fatal(c.name, err)
		}
		if got, _ := leastSamples(m, c.least, 10, Costs{Build: 600, Boot: 120, Sample: 60}); got != c.wantLeast {
			t.Errorf("%s (single samples %.1f spreads apart, %.0f %% of them cross): a search boot starts with %d samples, want %d", c.name, m.Separation(1), 100*m.Crossings, got, c.wantLeast)
		}
	}
	// Far apart, but a lone sample lands on the other side often, or a
	// boot costs far more than a sample: a boot of one then tells less
	// per second than the median of three.
	kexec := Costs{Build: 600, Boot: 120, Sample: 60}
	m := Model{Good: math.Log(3000), Bad: math.Log(50000), BootSpread: 0.05, Spread: 0.3, BadBoots: 0.05, SpikesGood: 0.05, SpikesBad: 0.05, Nu: 4}.filled()
	for _, c := range []struct {
		crossings float64
		costs     Costs
		want      int
		why       string
	}{{0.05, kexec, 1, "one sample is decisive here (single samples 9.3 spreads apart): a boot starts with one, and takes more up to 10 while it is unsure"},
		{0.15, kexec, 3, "single samples are 9.3 spreads apart, but a boot of 3 tells more per second here (15 % of a side's samples landed on the other side in calibration; a boot costs 2m0s, a sample 1m0s): a boot starts with 3"},
		// A firmware reboot (4 minutes) and a settle of 1 a boot: take
		// more of each.
		{0.05, Costs{Build: 600, Boot: 300, Sample: 60}, 3, "single samples are 9.3 spreads apart, but a boot of 3 tells more per second here (5 % of a side's samples landed on the other side in calibration; a boot costs 5m0s, a sample 1m0s): a boot starts with 3"}} {
		m.Crossings = c.crossings
		if got, why := leastSamples(m, 3, 10, c.costs); got != c.want || why != c.why {
			t.Errorf("%.0f %% of lone samples crossing: a boot starts with %d (%q), want %d (%q)", 100*c.crossings, got, why, c.want, c.why)
		}
	}
}

// flip swaps a share of the samples of each side's boots for samples at
// the other side's level (the median of its boots' medians).
func flip(rng *rand.Rand, goods, bads [][]float64, share float64) {
	level := func(boots [][]float64) float64 {
		var ms []float64
		for _, b := range boots {
			ms = append(ms, median(b))
		}
		return median(ms)
	}
	g, b := level(goods), level(bads)
	for _, set := range []struct {
		boots [][]float64
		to    float64
	}{{goods, b}, {bads, g}} {
		for _, boot := range set.boots {
			for i := range boot {
				if rng.Float64() < share {
					boot[i] = set.to * math.Exp(0.1*rng.NormFloat64())
				}
			}
		}
	}
}

func TestCalibrationLearnsHowOftenALoneSampleLandsOnTheOtherSide(t *testing.T) {
	// A lone sample was weighed as if 5 % of samples landed on the other
	// side whatever calibration saw: on a machine where 15 % of them do,
	// each boot of one sample said 9:1 where it says under 5:1.
	rng := rand.New(rand.NewPCG(3, 5))
	learn := func(flips, upward float64, n int) []float64 {
		var got []float64
		for r := 0; r < 200; r++ {
			goods, bads := calibrationOf(rng, math.Log(3000), math.Log(50000), 0.05, 0.3, 3, n)
			flip(rng, goods, bads, flips)
			// Spikes that only go up cross from the good side alone.
			for _, b := range goods {
				for i := range b {
					if rng.Float64() < upward {
						b[i] *= 20
					}
				}
			}
			m, err := Fit(goods, bads, FitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, m.Crossings)
		}
		sort.Float64s(got)
		return got
	}
	for _, c := range []struct {
		name          string
		flips, upward float64
		n             int
		lo, hi        float64 // the median's bounds
		belowFloor    float64 // at most this share of calibrations at the 5 % floor
	}{
		{"none", 0, 0, 5, 0.05, 0.05, 1},
		{"5 % flipped", 0.05, 0, 5, 0.05, 0.07, 1},
		{"15 % flipped", 0.15, 0, 5, 0.09, 0.15, 0.1},
		{"30 % flipped", 0.3, 0, 5, 0.13, 0.25, 0.01}, // 1 in 200: its modes fitted where a third of the samples flipped
		{"15 % spikes 20×, up only", 0, 0.15, 5, 0.07, 0.12, 0.2},
		{"15 % flipped, boots of 3", 0.15, 0, 3, 0.07, 0.13, 0.2},
	} {
		got := learn(c.flips, c.upward, c.n)
		floor := sort.SearchFloat64s(got, 0.05+1e-9)
		if med := got[len(got)/2]; med < c.lo || med > c.hi || float64(floor) > c.belowFloor*float64(len(got)) {
			t.Errorf("%s: calibrations learn that %.3f cross (median of %d; 10 %%–90 %%: %.3f–%.3f; %d at the floor), want %.2f to %.2f, at most %.0f %% at the floor",
				c.name, med, len(got), got[len(got)/10], got[len(got)*9/10], floor, c.lo, c.hi, 100*c.belowFloor)
		}
	}
	// Boots of one or two samples have no median of their own to cross
	// from: they teach nothing of it, and the floor stands.
	var goods, bads [][]float64
	for i := 0; i < 6; i++ {
		goods = append(goods, levelBoot(rng, math.Log(3000), 0.05, 0.3, 1+i%2))
		bads = append(bads, levelBoot(rng, math.Log(50000), 0.05, 0.3, 1+i%2))
	}
	if m, _ := Fit(goods, bads, FitOptions{}); m.Crossings != minOutliers {
		t.Errorf("boots of 1 and 2 samples: %.3f cross, want the floor %.2f", m.Crossings, minOutliers)
	}
	// Taken as given, it is kept.
	goods, bads = calibrationOf(rng, math.Log(3000), math.Log(50000), 0.05, 0.3, 3, 5)
	flip(rng, goods, bads, 0.3)
	if m, _ := Fit(goods, bads, FitOptions{Crossings: 0.07}); m.Crossings != 0.07 {
		t.Errorf("FitOptions.Crossings 0.07 gave %.3f", m.Crossings)
	}
}

func TestOneSampleSaysNoMoreThanASpikeAllows(t *testing.T) {
	// A lone sample at the bad level may be a good boot's spike, or a
	// sample that crossed: with 5 % of boots on the wrong side and 5 % of
	// samples crossing, such a boot says at most
	// (0.95·0.95 + 0.05·0.05):(0.05·0.95 + 0.95·0.05), about 9:1, where
	// three samples at the level say up to 19:1.
	m := Model{Good: math.Log(3000), Bad: math.Log(50000), BootSpread: 0.05, Spread: 0.3, BadBoots: 0.05, SpikesGood: 0.05, SpikesBad: 0.05, Nu: 4}
	one := m.Evidence([]float64{50000})
	three := m.Evidence([]float64{50000, 48000, 52000})
	limit := math.Log(0.905 / 0.095)
	if one > limit+1e-9 || one < 0.9*limit {
		t.Errorf("one sample at the bad level says %.3f (%.1f:1), want just under %.3f (%.1f:1)", one, math.Exp(one), limit, math.Exp(limit))
	}
	if three < 0.9*m.filled().Cap() {
		t.Errorf("three samples at the bad level say %.3f, want near the cap %.3f", three, m.filled().Cap())
	}
	// A lone sample at the good level says as much the other way, up to
	// the same limit; a little more than one at the bad level, which
	// may also be a good boot's spike (spikes rise, a low sample is
	// none).
	if good := m.Evidence([]float64{3000}); good < -limit-1e-9 || -good < one || -good > one+0.1 {
		t.Errorf("one sample at the good level says %.3f, one at the bad %.3f: want from %.3f to %.3f", good, one, -one-0.1, -one)
	}
	// A search boot stops at one such sample: it is as decisive as a
	// sample can be.
	s, err := New(Chain(16), m, Options{MinSamples: 1, MaxSamples: 10})
	if err != nil {
		t.Fatal(err)
	}
	if s.More([]float64{50000}) {
		t.Error("a boot whose one sample sits at the bad level asks for another")
	}
	if !s.More([]float64{12000}) {
		t.Error("a boot whose one sample sits between the sides does not ask for another")
	}
}

func TestASearchOfOneSampleBootsKeepsCalibrationsSpread(t *testing.T) {
	// Its boots give a second sample only when the first was unclear (a
	// spike, a tail): refitted from them, the spread within a boot came
	// out far above the true 0.3.
	rng := rand.New(rand.NewPCG(7, 3))
	sample := func(level float64) float64 {
		x := math.Exp(level + 0.3*rng.NormFloat64())
		if rng.Float64() < 0.1 {
			x *= 2 + 18*rng.Float64()
		}
		return x
	}
	good, bad := math.Log(3000), math.Log(50000)
	goods, bads := calibrationOf(rng, good, bad, 0.05, 0.3, 3, 5)
	m, err := Fit(goods, bads, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Chain(400), m, Options{MinSamples: 1, MaxSamples: 10, MaxBoots: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i := range bads {
		s.ObserveAt(399, bads[i])
		s.ObserveAt(GoodEndpoint, goods[i])
	}
	for i := 0; i < 200; i++ {
		commit, level := 399, bad
		if i%2 == 0 {
			commit, level = 0, good
		}
		var xs []float64
		for len(xs) == 0 || s.More(xs) {
			xs = append(xs, sample(level))
		}
		s.Observe(Step{Kind: Measure, Commit: commit}, xs)
	}
	if got := s.Model().Spread; got != m.Spread {
		t.Errorf("after 200 one-sample boots the spread within a boot is %.3f, calibration's %.3f", got, m.Spread)
	}
}
