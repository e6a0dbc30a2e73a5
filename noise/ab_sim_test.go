package noise

import (
	"math"
	"math/rand/v2"
	"testing"
)

// abRun simulates kbisect ab on two kernels: rounds boots per side,
// alternating, samples per boot. Each boot scales its samples by a factor
// of its own (boot-to-boot variation: where the tick lands, cache
// colouring), drawn with spread bootSigma.
func abRun(rng *rand.Rand, da, db lognormal, rounds, samples int, bootSigma float64) Comparison {
	var a, b []float64
	var boots []int
	for r := 0; r < rounds; r++ {
		for _, s := range []struct {
			d    lognormal
			side *[]float64
		}{{da, &a}, {db, &b}} {
			boot := math.Exp(bootSigma * rng.NormFloat64())
			for i := 0; i < samples; i++ {
				*s.side = append(*s.side, boot*s.d.draw(rng))
			}
		}
		boots = append(boots, samples)
	}
	am, err := BootMedians(a, boots)
	if err != nil {
		panic(err)
	}
	bm, err := BootMedians(b, boots)
	if err != nil {
		panic(err)
	}
	return Compare(am, bm, 0.95)
}

// TestABOfIdenticalKernelsFindsNoDifferenceInAtLeast95PercentOfRuns: the
// A/B comparison at confidence 0.95 must not see a difference between two
// identical kernels in more than one run in twenty, boot-to-boot
// variation or not (it compares boots, not samples: samples of one boot
// share its luck, and comparing them inflated this rate to 9% with boots
// varying by 20%). It must still see a real difference: the seed report's
// regression always, and a 2× one (15 µs against 7 µs) in most runs.
func TestABOfIdenticalKernelsFindsNoDifferenceInAtLeast95PercentOfRuns(t *testing.T) {
	quiet := lognormal{median: 3000, sigma: 0.35, spikes: 0.05}
	const runs = 1000
	for _, c := range []struct {
		name            string
		a, b            lognormal
		rounds, samples int
		bootSigma       float64
		min, max        float64 // share of runs that find a difference
	}{
		{"identical, 5x3, boots alike", quiet, quiet, 5, 3, 0, 0, 0.05},
		{"identical, 5x3, boots vary ~20%", quiet, quiet, 5, 3, 0.2, 0, 0.05},
		{"identical, 6x3, boots vary ~40%", quiet, quiet, 6, 3, 0.4, 0, 0.05},
		{"seed regression, 5x3", lognormal{median: 50e6, sigma: 0.05}, quiet, 5, 3, 0.1, 1, 1},
		{"2x apart, 5x3, boots vary ~10%", lognormal{median: 15000, sigma: 0.35, spikes: 0.05}, lognormal{median: 7000, sigma: 0.35, spikes: 0.05}, 5, 3, 0.1, 0.75, 1},
	} {
		rng := rand.New(rand.NewPCG(8, 30))
		differ := 0
		for i := 0; i < runs; i++ {
			if abRun(rng, c.a, c.b, c.rounds, c.samples, c.bootSigma).Significant() {
				differ++
			}
		}
		rate := float64(differ) / runs
		t.Logf("%s: a difference in %.1f%% of %d runs", c.name, 100*rate, runs)
		if rate < c.min || rate > c.max {
			t.Errorf("%s: a difference in %.1f%% of runs, want %.0f%% to %.0f%%", c.name, 100*rate, 100*c.min, 100*c.max)
		}
	}
}

func TestBootMediansCoverEverySample(t *testing.T) {
	got, err := BootMedians([]float64{1, 9, 2, 5, 5, 7}, []int{3, 2, 1})
	if err != nil || len(got) != 3 || got[0] != 2 || got[1] != 5 || got[2] != 7 {
		t.Errorf("%v, %v", got, err)
	}
	for _, boots := range [][]int{{3, 2}, {3, 4}, {0, 6}} {
		if _, err := BootMedians([]float64{1, 2, 3, 4, 5, 6}, boots); err == nil {
			t.Errorf("boots %v accepted for 6 values", boots)
		}
	}
}
