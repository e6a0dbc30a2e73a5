package culprit

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Model is how a kernel's samples scatter, learned from boots of both
// endpoints and kept up to date by the search. It works on the log of
// the badness (a value that grows as the kernel gets worse): noise is
// multiplicative and heavy-tailed.
//
// A boot shows one of two modes: the good one, its level around Good,
// or the bad one, around Bad (a share Shows of a bad kernel's boots show
// the bad mode — fewer than all when the regression is intermittent —
// and a share BadBoots of a good kernel's boots do too: boots on the
// wrong side). Each boot's level is off by BootSpread from its mode's,
// and moves with the machine's drift over the night. Within a boot,
// samples scatter around the boot's level with Spread on a Student-t
// with Nu degrees of freedom, and a share of them (SpikesGood in the
// good mode, SpikesBad in the bad one) are spikes that could land
// anywhere: a regression may be in how often a kernel spikes, not in
// its level.
//
// The search does not trust Good and Bad, Shows and BadBoots as numbers:
// it integrates over them, so that a level learned from a few lucky
// boots cannot make a wrong answer certain. They are its current best
// guesses, for choosing boots and for reports.
type Model struct {
	Good       float64 `json:"good"`
	Bad        float64 `json:"bad"`
	BootSpread float64 `json:"boot_spread"`
	Spread     float64 `json:"spread"`
	// BadBoots is the share of a good kernel's boots that show the bad
	// mode; Shows the share of a bad kernel's that do.
	BadBoots float64 `json:"bad_boots"`
	Shows    float64 `json:"shows"`
	// SpikesGood and SpikesBad are each mode's share of spiking samples.
	SpikesGood float64 `json:"spikes_good"`
	SpikesBad  float64 `json:"spikes_bad"`
	Nu         float64 `json:"nu"`
	// SpikeSize and SpikeSpread are where a spike lands: its distance
	// above its boot's level (log scale) is mostly normal around
	// SpikeSize with spread SpikeSpread, and may be anything (0 in a
	// model from before they were learned: defaults).
	SpikeSize   float64 `json:"spike_size,omitempty"`
	SpikeSpread float64 `json:"spike_spread,omitempty"`
	// Crossings is the share of samples that land past the midpoint,
	// away from their boot's level, as calibration's boots showed it: a
	// boot of one sample shows the other mode that often on top.
	Crossings float64 `json:"crossings,omitempty"`
	// Drift is how far the machine's levels have moved since the run
	// began, on the log scale (0: as at calibration).
	Drift float64 `json:"drift,omitempty"`
}

// Floors of the model: what no calibration is believed to undercut. A
// few boots cannot show that boots never land on the wrong side, and an
// optimistic model stops early at the wrong commit.
const (
	// MinBadBoots is the least share of a good kernel's boots believed
	// to show the bad mode, and of a bad kernel's to show the good one:
	// a boot says at most 49:1 however many boots showed the machine
	// never lands on the wrong side.
	MinBadBoots = 0.02
	// minShows is the least share of a bad kernel's boots that show the
	// regression the search can follow: below it a regression is not
	// reproduced.
	minShows   = 0.2
	maxBadBoot = 0.5
	minSpikes  = 0.01
	maxSpikes  = 0.8
	// maxCrossings keeps a lone sample worth something: one that lands
	// on the wrong side 40 % of the time still says 3:2.
	maxCrossings  = 0.4
	minOutliers   = 0.05
	minSpread     = 0.05
	minBootSpread = 0.03
	defaultNu     = 4
	// outlierWidth is the range, in log units, a spike that is anything
	// is spread over: a factor of about 1,000.
	outlierWidth = 7.0
	// spikeAnywhere is the share of spikes that land anywhere in it, not
	// near SpikeSize.
	spikeAnywhere = 0.3
	// The spikes' size before any is learned, and the least spread.
	defaultSpikeSize   = 1.5
	defaultSpikeSpread = 1.0
	minSpikeSpread     = 0.3
)

// spikeLog is the log density of a spike d above its boot's level.
func (m *Model) spikeLog(d float64) float64 {
	z := (d - m.SpikeSize) / m.SpikeSpread
	return math.Log((1-spikeAnywhere)*math.Exp(-0.5*z*z)/(m.SpikeSpread*math.Sqrt(2*math.Pi)) + spikeAnywhere/outlierWidth)
}

// density is a sample's density under the model, its constants made
// once: the innermost loop of every likelihood.
type density struct {
	invSpread, tNorm, nu, halfNu1 float64
	nu4                           bool
	spikeSize, invSpikeSpread     float64
	spikeNorm, anywhere           float64
}

func (m *Model) dens() density {
	return density{invSpread: 1 / m.Spread, nu: m.Nu, halfNu1: (m.Nu + 1) / 2, nu4: m.Nu == 4,
		tNorm:     math.Exp(lgamma((m.Nu+1)/2)-lgamma(m.Nu/2)-0.5*math.Log(m.Nu*math.Pi)) / m.Spread,
		spikeSize: m.SpikeSize, invSpikeSpread: 1 / m.SpikeSpread,
		spikeNorm: (1 - spikeAnywhere) / (m.SpikeSpread * math.Sqrt(2*math.Pi)), anywhere: spikeAnywhere / outlierWidth}
}

// t is the Student-t's density at y for a boot at level mu.
func (d *density) t(y, mu float64) float64 {
	z := (y - mu) * d.invSpread
	if d.nu4 {
		b := 1 + z*z/4
		return d.tNorm / (b * b * math.Sqrt(b))
	}
	return d.tNorm * math.Pow(1+z*z/d.nu, -d.halfNu1)
}

// spike is a spike's density at y above a boot at level mu.
func (d *density) spike(y, mu float64) float64 {
	z := (y - mu - d.spikeSize) * d.invSpikeSpread
	return d.spikeNorm*math.Exp(-0.5*z*z) + d.anywhere
}

// at is a sample's density: a Student-t, or a spike with chance pi.
func (d *density) at(y, mu, pi float64) float64 {
	return (1-pi)*d.t(y, mu) + pi*d.spike(y, mu)
}

// Separation is how many boot-level standard deviations apart the two
// modes' levels are, for a boot of n samples: below about 1.5 a boot
// tells them apart by its level no better than a coin with a bias.
func (m Model) Separation(n int) float64 {
	sd := math.Sqrt(m.BootSpread*m.BootSpread + medianNoise(n)*m.Spread*m.Spread)
	return (m.Bad - m.Good) / sd
}

// Validate says whether the model can be searched with.
func (m Model) Validate() error {
	switch {
	case math.IsNaN(m.Good) || math.IsNaN(m.Bad) || math.IsInf(m.Good, 0) || math.IsInf(m.Bad, 0):
		return errors.New("the model has no levels")
	case !(m.Bad > m.Good) && !(m.SpikesBad > m.SpikesGood):
		return fmt.Errorf("the bad endpoint (%.4g) is not worse than the good one (%.4g), nor spikes more often", math.Exp(m.Bad), math.Exp(m.Good))
	case !(m.Spread > 0 && m.BootSpread > 0 && m.Nu > 0):
		return errors.New("the model has no spread")
	case !(m.BadBoots >= 0 && m.BadBoots < 0.5 && m.Shows > m.BadBoots && m.Shows <= 1):
		return errors.New("the model's shares of boots on each side are out of range")
	case !(m.SpikesGood >= 0 && m.SpikesGood < 1 && m.SpikesBad >= 0 && m.SpikesBad < 1):
		return errors.New("the model's shares of spikes are out of range")
	}
	return nil
}

// filled is the model with the zero values of an older caller's model
// (no Shows, no spikes per mode) made what they meant.
func (m Model) filled() Model {
	if m.Nu == 0 {
		m.Nu = defaultNu
	}
	if m.BadBoots == 0 {
		m.BadBoots = MinBadBoots
	}
	if m.Shows == 0 {
		m.Shows = 1 - m.BadBoots
	}
	if m.SpikeSize == 0 && m.SpikeSpread == 0 {
		m.SpikeSize, m.SpikeSpread = defaultSpikeSize, defaultSpikeSpread
	}
	m.SpikeSpread = math.Max(m.SpikeSpread, minSpikeSpread)
	// A lone sample lands at the other mode's level at least as often as
	// a few boots cannot rule out.
	m.Crossings = math.Max(m.Crossings, minOutliers)
	if m.SpikesGood == 0 && m.SpikesBad == 0 {
		m.SpikesGood, m.SpikesBad = minOutliers, minOutliers
	}
	m.SpikesGood = math.Max(m.SpikesGood, minSpikes)
	m.SpikesBad = math.Max(m.SpikesBad, minSpikes)
	return m
}

// spiky says the modes differ in how often they spike: a regression may
// then be in that alone, at the good level.
func (m Model) spiky() bool {
	return m.SpikesBad > 2*m.SpikesGood || m.SpikesGood > 2*m.SpikesBad
}

// gap is the least the bad mode's level exceeds the good one's by (see
// levelBelief.lay).
func (m Model) gap() float64 {
	if m.spiky() {
		return -2 * m.BootSpread
	}
	return 0
}

// rates are a boot's chances to show the bad mode on a bad kernel and on
// a good one, for a boot of n samples: a lone sample may also land at the
// other mode's level (Crossings).
func (m Model) rates(n int) (shows, wrong float64) {
	shows, wrong = m.Shows, m.BadBoots
	if n == 1 {
		c := m.Crossings
		shows, wrong = shows*(1-c)+(1-shows)*c, wrong*(1-c)+(1-wrong)*c
	}
	return shows, wrong
}

// Cap is the most one boot of several samples can say for bad:
// ln(Shows/BadBoots).
func (m Model) Cap() float64 {
	m = m.filled()
	return math.Log(m.Shows / m.BadBoots)
}

// capOf is the most a boot of n samples can say either way.
func (m Model) capOf(n int) float64 {
	r, e := m.rates(n)
	return math.Max(math.Log(r/e), math.Log((1-e)/(1-r)))
}

// Evidence is the log-likelihood ratio "like bad" over "like good" of
// one boot's samples (badness values) under the model's best guesses:
// positive says bad. It is what the search's choices and the reports
// use; the posterior integrates over what the model is unsure of.
func (m Model) Evidence(samples []float64) float64 {
	m = m.filled()
	r := newReading(samples)
	if r.empty() {
		return 0
	}
	return m.evidenceOf(r, 0)
}

// evidenceOf is Evidence of a reading, the machine drifted by drift.
func (m Model) evidenceOf(r *reading, drift float64) float64 {
	lo, hi := math.Min(m.Good, m.Bad)+drift, math.Max(m.Good, m.Bad)+drift
	r.prepare(&m, lo, hi)
	fg, fb := r.at(0, m.Good+drift, m.BootSpread), r.at(1, m.Bad+drift, m.BootSpread)
	shows, wrong := m.rates(len(r.ys))
	return logAdd(math.Log(shows)+fb, math.Log(1-shows)+fg) - logAdd(math.Log(wrong)+fb, math.Log(1-wrong)+fg)
}

// drawBoot draws n samples of one boot of a kernel on the given side, as
// the model believes they scatter: the planner's picture of what a boot
// can say.
func (m Model) drawBoot(rng *rand.Rand, bad bool, n int) []float64 {
	p := m.BadBoots
	if bad {
		p = m.Shows
	}
	mode := rng.Float64() < p
	level, spikes := m.Good, m.SpikesGood
	if mode {
		level, spikes = m.Bad, m.SpikesBad
	}
	level += m.BootSpread * rng.NormFloat64()
	ys := make([]float64, n)
	for i := range ys {
		if rng.Float64() < spikes {
			d := outlierWidth * (rng.Float64() - 0.5)
			if rng.Float64() >= spikeAnywhere {
				d = m.SpikeSize + m.SpikeSpread*rng.NormFloat64()
			}
			ys[i] = math.Exp(level + d)
			continue
		}
		// A Student-t draw: a normal over the root of a scaled χ² (of
		// at least one degree: none would divide by zero).
		chi := 0.0
		for k := 0; k < max(int(m.Nu), 1); k++ {
			g := rng.NormFloat64()
			chi += g * g
		}
		ys[i] = math.Exp(level + m.Spread*rng.NormFloat64()/math.Sqrt(chi/m.Nu))
	}
	if n == 1 && rng.Float64() < m.Crossings {
		// A lone sample at the other mode's level.
		other := m.Bad
		if mode {
			other = m.Good
		}
		ys[0] = math.Exp(other + m.Spread*rng.NormFloat64())
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
