package culprit

import (
	"math"
	"math/rand/v2"
)

// choose picks the commit whose next boot says the most about the
// culprit per second: the information a boot gives about a commit's
// state (bad with probability q) over what it costs, a build included
// when its kernel is not built yet.
func (s *Search) choose(pc []float64) (int, float64) {
	q := s.d.badness(pc)
	boot := s.opt.Costs.Boot + float64(s.opt.MinSamples)*s.opt.Costs.Sample
	best, bestValue, bestGain := -1, 0.0, 0.0
	unsure, unsureH := -1, h2(unsureAt)
	for x, qx := range q {
		if s.skip[x] {
			continue
		}
		if h := h2(qx); h > unsureH {
			unsure, unsureH = x, h
		}
		g := s.gain.at(qx)
		cost := boot
		if !s.built[x] {
			cost += s.opt.Costs.Build
		}
		v := g / math.Max(cost, 1e-9)
		if v > bestValue || (v == bestValue && best >= 0 && math.Abs(qx-0.5) < math.Abs(q[best]-0.5)) {
			best, bestValue, bestGain = x, v, g
		}
	}
	if bestGain < minGain && unsure >= 0 {
		// The table, drawn for a boot of the least samples, says a
		// boot tells next to nothing about any commit; but a commit
		// still unsure is worth its boot (boots that spike take more
		// samples than the least, and tell more than the table).
		return unsure, minGain
	}
	return best, bestGain
}

// minGain is the least a boot must tell (in bits) for the search to take
// it; unsureAt the badness from which a commit is still worth a boot
// when the gain table says none is.
const (
	minGain  = 1e-4
	unsureAt = 1e-3
)

// gainTable is what one boot of n samples tells, in bits, about a
// commit that is bad with probability q, tabulated on q's log-odds.
type gainTable struct {
	lo, step float64
	bits     []float64
}

// newGainTable draws boots from the model as it believes they scatter,
// on each side, and averages how much each would move the belief.
func newGainTable(m Model, n int) gainTable {
	rng := rand.New(rand.NewPCG(1, 19))
	const draws = 200
	var lg, lb [draws]float64
	for i := 0; i < draws; i++ {
		lg[i] = m.quickEvidence(m.drawBoot(rng, false, n), 0)
		lb[i] = m.quickEvidence(m.drawBoot(rng, true, n), 0)
	}
	t := gainTable{lo: -16, step: 0.25}
	for k := 0; k <= 128; k++ {
		z := t.lo + float64(k)*t.step
		q := 1 / (1 + math.Exp(-z))
		after := 0.0
		for i := 0; i < draws; i++ {
			after += q*h2(sigmoid(z+lb[i])) + (1-q)*h2(sigmoid(z+lg[i]))
		}
		t.bits = append(t.bits, math.Max(0, h2(q)-after/draws))
	}
	return t
}

// quickEvidence is Evidence at the model's best guesses, computed on a
// grid laid around each mode's level alone: for the planner's many
// imagined boots and for a boot's next sample, where a reading's grid
// would cost more than it tells.
func (m Model) quickEvidence(samples []float64, drift float64) float64 {
	ys := make([]float64, 0, len(samples))
	for _, x := range samples {
		if x > 0 && !math.IsInf(x, 0) {
			ys = append(ys, math.Log(x))
		}
	}
	if len(ys) == 0 {
		return 0
	}
	fg := m.logLevel(ys, m.Good+drift, m.SpikesGood)
	fb := m.logLevel(ys, m.Bad+drift, m.SpikesBad)
	shows, wrong := m.rates(len(ys))
	return logAdd(math.Log(shows)+fb, math.Log(1-shows)+fg) - logAdd(math.Log(wrong)+fb, math.Log(1-wrong)+fg)
}

// logLevel is the log of ∫ N(μ; centre, BootSpread²) Π f(y|μ) dμ, the
// samples a Student-t around μ or a spike (share spikes) that could be
// anywhere. The integrand is narrow (the samples pin μ down), so the
// grid is laid around where prior and samples meet.
func (m Model) logLevel(ys []float64, centre, spikes float64) float64 {
	tau := m.BootSpread
	n := float64(len(ys))
	yhat := median(ys)
	pt, pd := 1/(tau*tau), n/(m.Spread*m.Spread)
	mid := (centre*pt + yhat*pd) / (pt + pd)
	w := 1 / math.Sqrt(pt+pd)
	d := m.dens()
	const points = 41
	lo, step := mid-7*w, 14*w/(points-1)
	terms := make([]float64, points)
	for i := range terms {
		mu := lo + float64(i)*step
		z := (mu - centre) / tau
		l := -0.5*z*z - math.Log(tau) - 0.5*math.Log(2*math.Pi)
		p := 1.0
		for k, y := range ys {
			p *= d.at(y, mu, spikes)
			if k%8 == 7 {
				l, p = l+math.Log(p), 1
			}
		}
		l += math.Log(p)
		terms[i] = l
	}
	return logSum(terms) + math.Log(step)
}

func (t gainTable) at(q float64) float64 {
	if q <= 1e-9 || q >= 1-1e-9 {
		return 0
	}
	z := math.Log(q / (1 - q))
	f := (z - t.lo) / t.step
	if f <= 0 {
		return t.bits[0] * math.Exp(f*t.step)
	}
	k := int(f)
	if k >= len(t.bits)-1 {
		return t.bits[len(t.bits)-1] * math.Exp(-(f-float64(len(t.bits)-1))*t.step)
	}
	w := f - float64(k)
	return t.bits[k]*(1-w) + t.bits[k+1]*w
}

func sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

// h2 is the binary entropy in bits.
func h2(q float64) float64 {
	if q <= 0 || q >= 1 {
		return 0
	}
	return -(q*math.Log2(q) + (1-q)*math.Log2(1-q))
}
