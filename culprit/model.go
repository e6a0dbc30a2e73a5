package culprit

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Model is how a kernel's samples scatter, learned from boots of both
// endpoints. It works on the log of the badness (a value that grows as
// the kernel gets worse): noise is multiplicative and heavy-tailed.
//
// A boot has a level: a good kernel's boots sit around Good, a bad one's
// around Bad, each boot off by BootSpread (IRQ and timer placement, SMIs
// and memory layout differ per boot), and a share BadBoots of boots sits
// at the other side's level. Within a boot, samples scatter around the
// boot's level with Spread on a Student-t with Nu degrees of freedom, and
// a share Outliers of them is a spike that says nothing of the level.
// So one boot is one piece of evidence, however many samples it gave:
// at most (1−BadBoots)/BadBoots to one.
type Model struct {
	Good       float64 `json:"good"`
	Bad        float64 `json:"bad"`
	BootSpread float64 `json:"boot_spread"`
	Spread     float64 `json:"spread"`
	BadBoots   float64 `json:"bad_boots"`
	Outliers   float64 `json:"outliers"`
	Nu         float64 `json:"nu"`

	c constants
}

// constants are the model's terms that do not depend on the samples.
type constants struct {
	ready           bool
	t               float64 // log of the Student-t's normalising constant
	inlier, outlier float64 // logs of the shares, the outlier's over its width
}

func (m *Model) prepare() {
	nu, s := m.Nu, m.Spread
	m.c = constants{ready: true,
		t:       lgamma((nu+1)/2) - lgamma(nu/2) - 0.5*math.Log(nu*math.Pi) - math.Log(s),
		inlier:  math.Log(1 - m.Outliers),
		outlier: math.Log(m.Outliers / outlierWidth)}
}

// Floors of the model: what no calibration is believed to undercut. A
// few boots cannot show that boots never land on the wrong side, and an
// optimistic model stops early at the wrong commit.
const (
	MinBadBoots   = 0.05
	minOutliers   = 0.05
	minSpread     = 0.05
	minBootSpread = 0.03
	defaultNu     = 4
	// outlierWidth is the range, in log units, a spike is spread over:
	// a factor of about 1,000.
	outlierWidth = 7.0
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
}

// Fit learns the model from boots of the good and the bad endpoint: each
// boot is its samples' badness values (positive, larger is worse). The
// levels are the medians of the boots' medians, so one boot on the wrong
// side does not move them; the spreads are pooled median absolute
// deviations, raised to an upper bound at 90 % for the few degrees of
// freedom a calibration has.
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
			// Two samples are each half their difference from their
			// median, √2 less than a sample scatters.
			scale := 1.0
			if len(boot) == 2 {
				scale = math.Sqrt2
			}
			for _, y := range boot {
				within = append(within, scale*math.Abs(y-c))
			}
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

// Separation is how many boot-level standard deviations apart the two
// sides are, for a boot of n samples: below about 1.5 a boot tells them
// apart no better than a coin with a bias.
func (m Model) Separation(n int) float64 {
	sd := math.Sqrt(m.BootSpread*m.BootSpread + medianNoise(n)*m.Spread*m.Spread)
	return (m.Bad - m.Good) / sd
}

// Validate says whether the model can tell the sides apart at all.
func (m Model) Validate() error {
	switch {
	case !(m.Bad > m.Good):
		return fmt.Errorf("the bad endpoint (%.4g) is not worse than the good one (%.4g)", math.Exp(m.Bad), math.Exp(m.Good))
	case !(m.Spread > 0 && m.BootSpread > 0 && m.Nu > 0):
		return errors.New("the model has no spread")
	case !(m.BadBoots > 0 && m.BadBoots < 0.5 && m.Outliers >= 0 && m.Outliers < 0.5):
		return errors.New("the model's shares of bad boots and outliers are out of range")
	}
	return nil
}

// Cap is the most one boot can say either way: ln((1−b)/b).
func (m Model) Cap() float64 { return math.Log((1 - m.BadBoots) / m.BadBoots) }

// capOf is the most a boot of n samples can say: a boot of one sample
// also lands on the wrong side when that sample is a spike, which may
// land anywhere, the other side's level included.
func (m Model) capOf(n int) float64 {
	a := m.away(n)
	return math.Log((1 - a) / a)
}

// away is the share of boots of n samples whose samples sit at the other
// side's level: the boots on the wrong side, and for one sample also its
// spikes.
func (m Model) away(n int) float64 {
	if n == 1 {
		return 1 - (1-m.BadBoots)*(1-m.Outliers)
	}
	return m.BadBoots
}

// Evidence is the log-likelihood ratio "like bad" over "like good" of
// one boot's samples (badness values): positive says bad. It is bounded
// by ±Cap whatever the samples.
func (m Model) Evidence(samples []float64) float64 {
	ys := make([]float64, 0, len(samples))
	for _, x := range samples {
		if x > 0 && !math.IsInf(x, 0) {
			ys = append(ys, math.Log(x))
		}
	}
	return m.logEvidence(ys)
}

func (m Model) logEvidence(ys []float64) float64 {
	if len(ys) == 0 {
		return 0
	}
	if !m.c.ready {
		m.prepare()
	}
	ig, ib := m.logLevel(ys, m.Good), m.logLevel(ys, m.Bad)
	away := m.away(len(ys))
	lb, la := math.Log(1-away), math.Log(away)
	return logAdd(lb+ib, la+ig) - logAdd(lb+ig, la+ib)
}

// logLevel is the log of ∫ N(μ; centre, BootSpread²) Π f(y|μ) dμ: how
// likely the boot's samples are when its level scatters around centre.
// The integrand is narrow (the samples pin μ down), so the grid is laid
// around where prior and samples meet.
func (m Model) logLevel(ys []float64, centre float64) float64 {
	tau := m.BootSpread
	n := float64(len(ys))
	yhat := median(ys)
	pt, pd := 1/(tau*tau), n/(m.Spread*m.Spread)
	mid := (centre*pt + yhat*pd) / (pt + pd)
	w := 1 / math.Sqrt(pt+pd)
	const points = 49
	lo, step := mid-8*w, 16*w/(points-1)
	terms := make([]float64, points)
	for i := range terms {
		mu := lo + float64(i)*step
		z := (mu - centre) / tau
		l := -0.5*z*z - math.Log(tau) - 0.5*math.Log(2*math.Pi)
		for _, y := range ys {
			l += m.logSample(y, mu)
		}
		terms[i] = l
	}
	return logSum(terms) + math.Log(step)
}

// logSample is log f(y|μ): a Student-t around the boot's level, or a
// spike that could be anywhere.
func (m Model) logSample(y, mu float64) float64 {
	z := (y - mu) / m.Spread
	lt := m.c.t - (m.Nu+1)/2*math.Log1p(z*z/m.Nu)
	if m.Outliers <= 0 {
		return lt
	}
	return logAdd(m.c.inlier+lt, m.c.outlier)
}

// drawBoot draws n samples of one boot of a kernel on the given side, as
// the model believes they scatter: the planner's picture of what a boot
// can say.
func (m Model) drawBoot(rng *rand.Rand, bad bool, n int) []float64 {
	level := m.Good
	if bad {
		level = m.Bad
	}
	if rng.Float64() < m.BadBoots {
		level = m.Good + m.Bad - level
	}
	level += m.BootSpread * rng.NormFloat64()
	ys := make([]float64, n)
	for i := range ys {
		if rng.Float64() < m.Outliers {
			ys[i] = level + outlierWidth*(rng.Float64()-0.5)
			continue
		}
		// A Student-t draw: a normal over the root of a scaled χ² (of
		// at least one degree: none would divide by zero).
		chi := 0.0
		for k := 0; k < max(int(m.Nu), 1); k++ {
			g := rng.NormFloat64()
			chi += g * g
		}
		ys[i] = level + m.Spread*rng.NormFloat64()/math.Sqrt(chi/m.Nu)
	}
	return ys
}

func lgamma(x float64) float64 {
	v, _ := math.Lgamma(x)
	return v
}

func logAdd(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	if math.IsInf(b, -1) {
		return a
	}
	return a + math.Log1p(math.Exp(b-a))
}

func logSum(xs []float64) float64 {
	top := math.Inf(-1)
	for _, x := range xs {
		top = math.Max(top, x)
	}
	if math.IsInf(top, -1) {
		return top
	}
	s := 0.0
	for _, x := range xs {
		s += math.Exp(x - top)
	}
	return top + math.Log(s)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
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
// search's boot starts with one: the midpoint between the sides lies three
// of a sample's spreads, boot to boot included, from either.
const decisiveSeparation = 6

// leastSamples is the fewest samples a search's boot takes on this model
// when Options.FromOne leaves it to the model: one when the endpoints lie so far
// apart that a single sample already says which side its boot is on (one
// that lands between them leaves the boot unsure, and More asks for the
// next), else least. Boots, not samples, are what beat boots on the wrong
// side and spikes: where one sample is decisive, a second and a third
// add time, not evidence.
func leastSamples(m Model, least int) int {
	if least > 1 && m.Separation(1) >= decisiveSeparation {
		return 1
	}
	return least
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
