package culprit

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// FitOptions say what the fit keeps as given.
type FitOptions struct {
	// BadBoots is the share of boots believed to land on the wrong side;
	// at least MinBadBoots.
	BadBoots float64
	// Spread, when positive, is the spread within a boot, taken rather
	// than learned: boots that gave another sample only because the ones
	// before were unclear would teach a spread wider than it is.
	Spread float64
	// Crossings, when positive, is the share of samples that land on the
	// other side (Model.Crossings), taken rather than learned, for the
	// same reason.
	Crossings float64
	// spiky fits the reading of a regression in how often it spikes
	// alone: the same level, the bad side's samples spiking more.
	spiky bool
}

// Fit learns the model from boots of the good and the bad endpoint: each
// boot is its samples' badness values (positive, larger is worse). The
// spread within a boot is the pooled median absolute deviation of each
// boot's samples from its own median (corrected for the boot's size by
// appendDeviations), raised to an upper bound at 90 % for the few
// degrees of freedom a calibration has; the modes, their levels and
// spikes, the boot spread and the shares of boots that show each mode
// are learned together (fitModes): a bad endpoint whose boots split
// between the good level and a worse one is an intermittent regression,
// not a noisy one.
func Fit(good, bad [][]float64, opt FitOptions) (Model, error) {
	if len(good) == 0 || len(bad) == 0 {
		return Model{}, errors.New("calibration: boots of both endpoints are needed")
	}
	lg, err := logBoots(good)
	if err != nil {
		return Model{}, fmt.Errorf("good endpoint: %w", err)
	}
	lb, err := logBoots(bad)
	if err != nil {
		return Model{}, fmt.Errorf("bad endpoint: %w", err)
	}
	var boots []sided
	for _, b := range lg {
		boots = append(boots, sided{ys: b})
	}
	for _, b := range lb {
		boots = append(boots, sided{ys: b, bad: true})
	}
	m := Model{Nu: defaultNu, BadBoots: math.Max(opt.BadBoots, MinBadBoots)}
	if m.BadBoots >= 0.5 {
		return Model{}, fmt.Errorf("bad boots %g: a kernel that lands on the wrong side half the time says nothing", m.BadBoots)
	}
	m.Spread = opt.Spread
	if m.Spread <= 0 {
		m.Spread = spreadWithin(lg, lb)
	}
	m.Spread = math.Max(m.Spread, minSpread)
	m, ok := fitBest(boots, m, opt.Spread > 0, opt.BadBoots, 0, opt.spiky)
	if !ok {
		return m, errors.New("the bad endpoint's boots measure below the good one's and spike no more often: no regression to search for")
	}
	m.Crossings = opt.Crossings
	if m.Crossings <= 0 {
		// Each side's own: spikes that only go up cross from the good
		// side alone, and a pooled share would halve them.
		mid := (m.Good + m.Bad) / 2
		m.Crossings = math.Max(crossingShare(lg, mid), crossingShare(lb, mid))
	}
	return m, nil
}

// spreadWithin is the spread of samples within a boot, pooled over the
// boots given (one-sample boots say nothing of it); 0 without any.
func spreadWithin(sides ...[][]float64) float64 {
	var all []float64
	df := 0
	for _, boots := range sides {
		for _, boot := range boots {
			if len(boot) < 2 {
				// One sample is its own median: it says nothing of
				// the scatter within a boot.
				continue
			}
			all = appendDeviations(all, boot, median(boot))
			df += len(boot) - 1
		}
	}
	if df == 0 {
		return 0
	}
	return 1.4826 * median(all) * inflation(df)
}

// madAround is the scaled median absolute deviation of xs from c.
func madAround(xs []float64, c float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	d := make([]float64, len(xs))
	for i, x := range xs {
		d[i] = math.Abs(x - c)
	}
	return 1.4826 * median(d)
}

func sq(x float64) float64 { return x * x }

func clamp(x, lo, hi float64) float64 { return math.Min(math.Max(x, lo), hi) }

// binom is the log of the binomial chance of k spikes in n samples at a
// share p (the coefficient left out: both modes share it).
func binom(k, n int, p float64) float64 {
	return float64(k)*math.Log(p) + float64(n-k)*math.Log(1-p)
}

// crossingShare is the share of one side's samples that land past the
// midpoint between the sides, away from their own boot's median: what a
// boot of one sample of that side is told wrong by, whatever the cause (a
// spike, a flip to the other side's level, a tail). It is learned from
// boots of three samples or more, whose median a single flip does not
// carry across (an odd boot's median sample cannot cross, and is not
// counted), and drawn toward minOutliers as if crossingPrior samples had
// shown that share: of 3 boots of 5 (12 samples counted), 1 crossing is
// 0.063, 2 are 0.094.
// Without such boots it is minOutliers, what a few boots cannot rule out.
func crossingShare(boots [][]float64, mid float64) float64 {
	crossed, n := 0, 0
	for _, boot := range boots {
		if len(boot) < 3 {
			continue
		}
		c := median(boot)
		high := c > mid
		for _, y := range besideMedian(boot, c) {
			n++
			if (y > mid) != high {
				crossed++
			}
		}
	}
	share := (float64(crossed) + crossingPrior*minOutliers) / (float64(n) + crossingPrior)
	return math.Min(math.Max(share, minOutliers), maxCrossings)
}

// crossingPrior is how many samples' worth the floor's share weighs
// against what calibration saw of one side.
const crossingPrior = 20

// appendDeviations adds a boot's samples' distances from its median c,
// each scaled so that the pooled median of them, times 1.4826, is the
// samples' spread whatever the boots' sizes. The median sits among its
// own samples, so the raw distances are short: an odd boot's median is
// one of them (a distance of 0 that says nothing, left out), an even
// boot's lies halfway between the middle two (both short, scaled up).
func appendDeviations(within, boot []float64, c float64) []float64 {
	k := medianConsistency(len(boot))
	for _, y := range besideMedian(boot, c) {
		within = append(within, k*math.Abs(y-c))
	}
	return within
}

// besideMedian is a boot's samples but the one that is its median c (an
// odd boot's; an even boot's median is none of them): the one sample
// that can be neither far from c nor across from it.
func besideMedian(boot []float64, c float64) []float64 {
	if len(boot)%2 == 0 {
		return boot
	}
	i := slices.Index(boot, c)
	if i < 0 {
		return boot
	}
	return append(append(make([]float64, 0, len(boot)-1), boot[:i]...), boot[i+1:]...)
}

// medianConsistency is the factor that makes an even boot's distances
// from its median those of a sample from its level, measured on normal
// samples (600,000 of each size); about 1 + 1.4/n past the table. An
// odd boot's, its median's own sample left out, are within 2 % already.
func medianConsistency(n int) float64 {
	if n%2 == 1 {
		return 1
	}
	if n <= 16 {
		return [...]float64{1.412, 1.388, 1.276, 1.199, 1.146, 1.120, 1.097, 1.085}[n/2-1]
	}
	return 1 + 1.4/float64(n)
}

// medianNoise is the variance of the median of n samples, in units of
// one sample's: 1 for one, ½ for the mean of two, about 1.57/n after.
func medianNoise(n int) float64 {
	switch {
	case n <= 1:
		return 1
	case n == 2:
		return 0.5
	}
	return 1.57 / float64(n)
}

func logBoots(boots [][]float64) ([][]float64, error) {
	out := make([][]float64, 0, len(boots))
	for _, b := range boots {
		if len(b) == 0 {
			continue
		}
		lb := make([]float64, len(b))
		for i, x := range b {
			if !(x > 0) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("%g is not a positive measurement", x)
			}
			lb[i] = math.Log(x)
		}
		out = append(out, lb)
	}
	if len(out) == 0 {
		return nil, errors.New("no samples")
	}
	return out, nil
}

// inflation makes a spread estimated on df degrees of freedom an upper
// bound at 90 %: √(df / χ²₀.₁₀(df)), the quantile by Wilson–Hilferty.
func inflation(df int) float64 {
	if df < 1 {
		return 1
	}
	k := float64(df)
	c := 1 - 2/(9*k) - 1.2816*math.Sqrt(2/(9*k))
	if c <= 0.05 {
		c = 0.05
	}
	return math.Min(math.Sqrt(1/(c*c*c)), 4)
}
