package culprit

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Forecast is what the rest of a search is likely to cost: the boots
// left until it ends (the boot it asks for next included) and the
// seconds they take at the lab's costs, builds included — each as the
// median of the searches run ahead and the range that holds the middle
// 90 % of their boots, 95 % of their seconds (down to the seconds of the
// boots' low end). The ranges are wider than the 80 % of real searches
// they should hold because the model is not the machine: the searches
// run ahead never sharpen it by refits, and take a little more boots.
type Forecast struct {
	Boots, BootsLow, BootsHigh       int
	Seconds, SecondsLow, SecondsHigh float64
	// Runs is how many searches were run ahead.
	Runs int
}

// Forecast runs the rest of the search ahead, runs times, on copies of
// it: each draws a culprit from the posterior as it stands (or none, at
// its probability), and boots from the model on the side that culprit
// puts each kernel, until the copy ends as the search would (found,
// inconclusive, not reproduced, or its budget spent). The copies never
// learn their model again and the machine does not drift further, so
// the range is what the model believes, not what a lab that breaks it
// may do. The search itself is not changed; the same search forecasts
// the same. A search ahead costs in proportion to the range: over
// forecastRange commits fewer are run, in proportion, down to 8 (on 2
// cores, 8 runs on 750,000 commits take 21 s; 30 on 50,000, 8 s).
func (s *Search) Forecast(runs int) Forecast {
	if s.sub != nil {
		return s.sub.s.Forecast(runs)
	}
	if n := s.d.Len(); n > forecastRange {
		runs = min(runs, max(8, runs*forecastRange/n))
	}
	if runs < 1 {
		runs = 1
	}
	pc, none := s.Probabilities()
	rng := rand.New(rand.NewPCG(uint64(s.runBoots)+1, uint64(s.total)+0x5eed))
	boots := make([]float64, runs)
	secs := make([]float64, runs)
	for i := range runs {
		boots[i], secs[i] = s.runAhead(rng, drawCulprit(rng, pc, none))
	}
	lo, mid, hi := quantiles(boots, 0.05)
	slo, smid, shi := quantiles(secs, 0.025)
	if mid > 0 {
		// The copies take a little more boots than the search does
		// (they never learn their model again), their seconds a boot
		// as many: the seconds of the fewest boots are a floor too.
		slo = math.Min(slo, math.Floor(lo)*smid/mid)
	}
	return Forecast{Boots: int(math.Round(mid)), BootsLow: int(math.Floor(lo)), BootsHigh: int(math.Ceil(hi)),
		Seconds: smid, SecondsLow: slo, SecondsHigh: shi, Runs: runs}
}

// forecastRange is the range over which Forecast runs fewer searches
// ahead.
const forecastRange = 65536

// runAhead runs a copy of the search to its end with culprit x (-1: no
// commit of the range is bad): the boots it took and their seconds.
func (s *Search) runAhead(rng *rand.Rand, x int) (float64, float64) {
	f := s.fork()
	c := f.opt.Costs
	boots, secs := 0, 0.0
	for limit := f.opt.MaxBoots - f.total + 1; boots < limit; boots++ {
		step := f.Next()
		if step.Kind != Measure {
			break
		}
		var bad bool
		switch {
		case step.Commit == goodEndpoint:
		case step.Reverted:
			bad = x >= 0 && step.Commit != x
			if f.reverted[step.Commit] == 0 {
				secs += c.Build
			}
		default:
			bad = x >= 0 && f.d.IsAncestor(x, step.Commit)
			if !f.built[step.Commit] {
				secs += c.Build
			}
		}
		ys := f.m.drawBoot(rng, bad, max(f.opt.MaxSamples, 1))
		if dr, _ := f.drift.at(f.runBoots); dr != 0 {
			for k := range ys {
				ys[k] *= math.Exp(dr)
			}
		}
		n := 1
		for n < len(ys) && f.More(ys[:n]) {
			n++
		}
		secs += c.Boot + float64(n)*c.Sample
		f.observe(Observation{Commit: step.Commit, Reverted: step.Reverted, Confirming: step.Confirming, Samples: ys[:n]})
	}
	return float64(boots), secs
}

// drawCulprit draws the first bad commit from the posterior: -1 for none.
func drawCulprit(rng *rand.Rand, pc []float64, none float64) int {
	u := rng.Float64()
	if u < none {
		return -1
	}
	u -= none
	for c, p := range pc {
		if u < p {
			return c
		}
		u -= p
	}
	return len(pc) - 1
}

// quantiles are the median of xs (sorted in place) and the quantiles
// tail and 1−tail, interpolated.
func quantiles(xs []float64, tail float64) (lo, mid, hi float64) {
	slices.Sort(xs)
	at := func(q float64) float64 {
		f := q * float64(len(xs)-1)
		k := int(f)
		if k >= len(xs)-1 {
			return xs[len(xs)-1]
		}
		return xs[k] + (f-float64(k))*(xs[k+1]-xs[k])
	}
	return at(tail), at(0.5), at(1 - tail)
}
