package culprit

import (
	"fmt"
	"math"
	"time"
)

// Calibration bounds: boots of each endpoint the model is learned from.
const (
	MinCalibrationBoots = 3
	// MaxCalibrationBoots is the most boots of each endpoint calibration
	// takes: settledBoots while the endpoints are clearly apart, more
	// while they may be (an intermittent regression shows on some boots
	// only, and a few boots of it can look like none).
	MaxCalibrationBoots = 20
	settledBoots        = 8
	// unsureBoots is where calibration stops while its answer is still
	// unsure but leaning; up to MaxCalibrationBoots while it may go
	// either way.
	unsureBoots = 12
	// wantSeparation is the separation after which more calibration boots
	// are not worth their time.
	wantSeparation = 3
	// reproducedAt is how sure calibration must be that the bad endpoint
	// is worse than the good one (from even odds) to search at all, and
	// apartAt when boots of the bad endpoint measure above every boot of
	// the good one (an intermittent regression's signature, which twenty
	// boots of a regression that shows on 30 % of them may still leave
	// unsure): a search can still end not reproduced, its posterior
	// weighing "no culprit" with every boot.
	reproducedAt = 0.5
	apartAt      = 0.05
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
	return least, fmt.Sprintf("single samples are %.1f spreads apart, but a boot of %d tells more per second here (%.0f %% of a side's samples landed on the other side in calibration; a boot costs %s, a sample %s): a boot starts with %d", m.Separation(1), least, 100*math.Max(m.Crossings, m.SpikesGood), sec(c.Boot), sec(c.Sample), least)
}

// Calibrate learns the model from the endpoints' boots so far, and says
// whether another boot of each is needed first: fewer than three each;
// the sides not clearly apart or a boot nearer the other side's level
// than its own (boots land on the wrong side, or the regression shows on
// some boots only, and a level learned from too few boots is then wrong)
// — up to eight each; and up to twelve, then twenty, while it is not yet
// sure whether the bad endpoint is worse at all (an intermittent
// regression needs boots to tell from boots on the wrong side). Once no
// more are needed, the error says the regression is not reproduced: the
// boots do not make the bad endpoint worse than the good one at even
// odds (the levels and the shares of boots that show each side
// integrated over), nor did two of its boots measure above every boot
// of the good one while the odds were at least 1:19.
func Calibrate(good, bad [][]float64, n int, opt FitOptions) (m Model, more bool, err error) {
	m, err = Fit(good, bad, opt)
	boots := min(len(good), len(bad))
	if boots < MinCalibrationBoots {
		return m, true, nil
	}
	if err != nil {
		return m, boots < MaxCalibrationBoots, err
	}
	p := Reproduced(good, bad, m)
	if p < 0.99 && !m.spiky() {
		// A regression in how often it spikes also reads as a level
		// that a few boots show, whose all-spiking boots it takes for
		// that level: where that reading does not reproduce it, the
		// reading of the spikes alone may.
		o := opt
		o.spiky = true
		if ms, err := Fit(good, bad, o); err == nil && ms.spiky() && ms.Validate() == nil {
			if ps := Reproduced(good, bad, ms); ps > p {
				m, p = ms, ps
			}
		}
	}
	settled := p >= 0.99 && m.Validate() == nil
	if settled && (m.Bad-m.Good) > 2*m.Spread && m.Separation(n) < wantSeparation {
		settled = false
	}
	if settled && m.spiky() && m.Bad-m.Good < 2*m.Spread && boots < settledBoots {
		// A regression in how often it spikes: a share is learned by
		// counting, and a few boots' count also reads as a level that
		// shows on some boots only.
		settled = false
	}
	if settled {
		for _, b := range good {
			if r := newReading(b); !r.empty() && m.evidenceOf(r, 0) > 0 {
				settled = false
			}
		}
		for _, b := range bad {
			if r := newReading(b); !r.empty() && m.evidenceOf(r, 0) < 0 {
				settled = false
			}
		}
	}
	switch {
	case settled:
	case boots < settledBoots:
		return m, true, nil
	case boots < unsureBoots && p < 0.99:
		return m, true, nil
	case boots < MaxCalibrationBoots && p < 0.99 && (p > 0.01 || (p > 0.001 && above(good, bad) > 0)):
		// Unsure; or sure of little, but a boot of the bad endpoint
		// measured above every boot of the good one (a regression
		// that shows on a few boots in ten has shown once or twice).
		return m, true, nil
	case p < reproducedAt && !(p >= apartAt && above(good, bad) >= 2):
		return m, false, fmt.Errorf("after %d boots of each, the bad endpoint is worse than the good one with a chance of only %.2f: a boot cannot tell a good kernel from a bad one", boots, p)
	}
	if err := m.Validate(); err != nil {
		return m, false, err
	}
	return m, false, nil
}

// above is how many of the bad endpoint's boots measure above every boot
// of the good one (their medians).
func above(good, bad [][]float64) int {
	top := math.Inf(-1)
	for _, b := range good {
		if r := newReading(b); !r.empty() {
			top = math.Max(top, median(r.ys))
		}
	}
	n := 0
	for _, b := range bad {
		if r := newReading(b); !r.empty() && median(r.ys) > top {
			n++
		}
	}
	return n
}

// Reproduced is the chance, from even odds, that the bad endpoint's boots
// measure worse than the good one's: the posterior of "the bad endpoint
// is bad" against "both are good", the levels and the shares of boots
// that show each mode integrated over, under model m's spreads.
func Reproduced(good, bad [][]float64, m Model) float64 {
	m = m.filled()
	w := newWeigher(Chain(1), &m, nil, 0.5)
	at := 0
	for i := 0; i < max(len(good), len(bad)); i++ {
		if i < len(bad) {
			w.add(kernel{commit: 0}, at, newReading(bad[i]), 0, m.BootSpread)
			at++
		}
		if i < len(good) {
			w.add(kernel{commit: goodEndpoint}, at, newReading(good[i]), 0, m.BootSpread)
			at++
		}
	}
	w.relay()
	return 1 - w.posterior().none
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

// AgainstThreshold is what an absolute threshold t says of the
// endpoints' calibration boots: that the bad endpoint is not bad (no boot
// of it has its median beyond t), or that the good one is bad too (every
// boot of it has). Either leaves nothing to search below that threshold.
func AgainstThreshold(goods, bads [][]float64, t float64) (badIsGood, goodIsBad bool) {
	beyond := func(boots [][]float64) int {
		n := 0
		for _, b := range boots {
			if median(b) > t {
				n++
			}
		}
		return n
	}
	return len(bads) > 0 && beyond(bads) == 0, len(goods) > 0 && beyond(goods) == len(goods)
}
