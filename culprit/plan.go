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
	for x, qx := range q {
		if s.skip[x] {
			continue
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
	return best, bestGain
}

// gainTable is what one boot of n samples tells, in bits, about a
// commit that is bad with probability q, tabulated on q's log-odds.
type gainTable struct {
	lo, step float64
	bits     []float64
}

// newGainTable draws boots from the model as it believes boots scatter,
// on each side, and averages how much each would move the belief.
func newGainTable(m Model, n int) gainTable {
	rng := rand.New(rand.NewPCG(1, 19))
	m.prepare()
	const draws = 200
	var lg, lb [draws]float64
	for i := 0; i < draws; i++ {
		lg[i] = m.logEvidence(m.drawBoot(rng, false, n))
		lb[i] = m.logEvidence(m.drawBoot(rng, true, n))
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
