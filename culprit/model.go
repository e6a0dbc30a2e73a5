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
	// Crossings is the share of samples that land past the midpoint,
	// away from their boot's level, as calibration's boots showed it (0
	// in a model from before it was learned: Outliers stands for it).
	Crossings float64 `json:"crossings,omitempty"`

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
	MinBadBoots = 0.05
	minOutliers = 0.05
	// maxCrossings keeps a lone sample worth something: one that lands
	// on the wrong side 40 % of the time still says 3:2.
	maxCrossings  = 0.4
	minSpread     = 0.05
	minBootSpread = 0.03
	defaultNu     = 4
	// outlierWidth is the range, in log units, a spike is spread over:
	// a factor of about 1,000.
	outlierWidth = 7.0
)

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
// side's level: the boots on the wrong side, and for one sample also the
// samples that land there (spikes, flips; Crossings as calibration saw
// them, at least Outliers).
func (m Model) away(n int) float64 {
	if n == 1 {
		return 1 - (1-m.BadBoots)*(1-math.Max(m.Outliers, m.Crossings))
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
