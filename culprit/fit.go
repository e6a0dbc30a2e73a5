package culprit

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// FitOptions say what the fit may not go below.
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
}

// Fit learns the model from boots of the good and the bad endpoint: each
// boot is its samples' badness values (positive, larger is worse). The
// levels are the medians of the boots' medians, so one boot on the wrong
// side does not move them; the spreads are pooled median absolute
// deviations (within a boot, from the boot's own median, corrected for
// its size by appendDeviations), raised to an upper bound at 90 % for the
// few degrees of freedom a calibration has.
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
	m := Model{Nu: defaultNu, Outliers: minOutliers, BadBoots: math.Max(opt.BadBoots, MinBadBoots)}
	if m.BadBoots >= 0.5 {
		return Model{}, fmt.Errorf("bad boots %g: a kernel that lands on the wrong side half the time says nothing", m.BadBoots)
	}
	var centresG, centresB []float64
	var within []float64
	withinDF, boots := 0, 0
	centreNoise := 0.0 // the mean of the boots' medianNoise
	for _, set := range []struct {
		boots   [][]float64
		centres *[]float64
	}{{lg, &centresG}, {lb, &centresB}} {
		for _, boot := range set.boots {
			c := median(boot)
			*set.centres = append(*set.centres, c)
			boots++
			centreNoise += medianNoise(len(boot))
			if len(boot) < 2 {
				// One sample is its own median: it says nothing of the
				// scatter within a boot.
				continue
			}
			within = appendDeviations(within, boot, c)
			withinDF += len(boot) - 1
		}
	}
	centreNoise /= float64(boots)
	m.Good, m.Bad = median(centresG), median(centresB)
	switch {
	case opt.Spread > 0:
		m.Spread = opt.Spread
	case withinDF > 0:
		m.Spread = 1.4826 * median(within) * inflation(withinDF)
	}
	m.Spread = math.Max(m.Spread, minSpread)
	m.Crossings = opt.Crossings
	if m.Crossings <= 0 {
		// Each side's own: spikes that only go up cross from the good
		// side alone, and a pooled share would halve them.
		mid := (m.Good + m.Bad) / 2
		m.Crossings = math.Max(crossingShare(lg, mid), crossingShare(lb, mid))
	}
	var between []float64
	for _, c := range centresG {
		between = append(between, math.Abs(c-m.Good))
	}
	for _, c := range centresB {
		between = append(between, math.Abs(c-m.Bad))
	}
	if df := len(between) - 2; df > 0 {
		s := 1.4826 * median(between) * inflation(df)
		// A boot's median scatters around its level by the samples'
		// spread even when the levels do not differ at all.
		m.BootSpread = math.Sqrt(math.Max(0, s*s-centreNoise*m.Spread*m.Spread))
	}
	m.BootSpread = math.Max(m.BootSpread, minBootSpread)
	return m, nil
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

// Calibration bounds: boots of each endpoint the model is learned from.
const (
	MinCalibrationBoots = 3
	MaxCalibrationBoots = 8
	// wantSeparation is the separation after which more calibration boots
	// are not worth their time, and minSeparation the least one a
	// bisection can run on.
	wantSeparation = 3
	minSeparation  = 0.75
)

// decisiveSeparation is the separation of single samples from which a
// search's boot starts with one: the midpoint between the sides lies 2.5
// of a sample's spreads, boot to boot included, from either — spreads
// calibration puts at an upper bound (about 1.25 of the true one after 3
// boots of 5 each), so about 3 true ones.
const decisiveSeparation = 5

// leastSamples is the fewest samples a search's boot takes on this model
// when Options.FromOne leaves it to the model: one when the endpoints lie so
// far apart that a single sample already says which side its boot is on
// (one that lands between them leaves the boot unsure, and More asks for
// the next) and a boot of one tells more per second than a boot of least
// does, else least. Boots, not samples, are what beat boots on the wrong
// side and spikes: where one sample is decisive, a second and a third add
// time, not evidence. Where a sample is often a spike at the other side's
// level, a boot of one says too little (Model.away) and the median of
// least is worth its samples; so too where a boot costs far more than a
// sample (a firmware reboot rather than kexec). The line why says which,
// for the run's log ("" when the sides are not that far apart).
func leastSamples(m Model, least, most int, c Costs) (n int, why string) {
	if least <= 1 || m.Separation(1) < decisiveSeparation {
		return least, ""
	}
	perSecond := func(n int) float64 {
		return newGainTable(m, n).at(0.5) / (c.Boot + float64(n)*c.Sample)
	}
	if perSecond(1) > perSecond(least) {
		return 1, fmt.Sprintf("one sample is decisive here (single samples %.1f spreads apart): a boot starts with one, and takes more up to %d while it is unsure", m.Separation(1), most)
	}
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)).Round(time.Second) }
	return least, fmt.Sprintf("single samples are %.1f spreads apart, but a boot of %d tells more per second here (%.0f %% of a side's samples landed on the other side in calibration; a boot costs %s, a sample %s): a boot starts with %d", m.Separation(1), least, 100*math.Max(m.Crossings, m.Outliers), sec(c.Boot), sec(c.Sample), least)
}

// Calibrate learns the model from the endpoints' boots so far, and says
// whether another boot of each is needed first: fewer than three each,
// or the sides not clearly apart, or a boot nearer the other side's level
// than its own (boots land on the wrong side, and a level learned from
// too few boots is then wrong) — up to eight each. Once no more are
// needed, the model's error says the regression is not reproduced.
func Calibrate(good, bad [][]float64, n int, opt FitOptions) (m Model, more bool, err error) {
	m, err = Fit(good, bad, opt)
	boots := min(len(good), len(bad))
	if boots < MinCalibrationBoots {
		return m, true, nil
	}
	if err == nil {
		err = m.Validate()
	}
	if err == nil && m.Separation(n) < minSeparation {
		err = fmt.Errorf("the endpoints measure %.2f boot spreads apart: a boot cannot tell a good kernel from a bad one", m.Separation(n))
	}
	if boots >= MaxCalibrationBoots {
		return m, false, err
	}
	if err != nil || m.Separation(n) < wantSeparation {
		return m, true, nil
	}
	mid := (m.Good + m.Bad) / 2
	for _, b := range good {
		if median(mustLog(b)) > mid {
			return m, true, nil
		}
	}
	for _, b := range bad {
		if median(mustLog(b)) < mid {
			return m, true, nil
		}
	}
	return m, false, nil
}

func mustLog(xs []float64) []float64 {
	out := make([]float64, 0, len(xs))
	for _, x := range xs {
		if x > 0 {
			out = append(out, math.Log(x))
		}
	}
	return out
}
