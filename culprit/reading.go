package culprit

import (
	"math"
	"slices"
)

// reading is one boot as the model reads it: its samples (logs of the
// badness) and, for each mode, the likelihood of those samples as a
// function of the boot's own level, on a grid. What a boot says of a
// mode whose level sits at c is that likelihood integrated against the
// boot-to-boot scatter around c (reading.at): the levels the search is
// unsure of move c, not the samples, so the grid is made once per model.
type reading struct {
	ys []float64
	// lo and step place the grid; lam[a][i] is log Π p(y | μ) for mode a
	// (0 good, 1 bad) at μ = lo + i·step.
	lo, step float64
	lam      [2][]float64
	// peak is, for each mode, the first and last grid points where the
	// samples' likelihood is within 30 (log) of its top.
	peak [2][2]int
	// made is the model the grid was made for.
	made gridModel
}

// gridModel is what a reading's grid depends on.
type gridModel struct {
	spread, nu, bootSpread float64
	spikes                 [2]float64
	spikeSize, spikeSpread float64
	lo, hi                 float64 // the centres it must serve
}

// newReading reads a boot's badness values (positive; others are
// dropped).
func newReading(samples []float64) *reading {
	ys := make([]float64, 0, len(samples))
	for _, x := range samples {
		if x > 0 && !math.IsInf(x, 0) {
			ys = append(ys, math.Log(x))
		}
	}
	slices.Sort(ys)
	return &reading{ys: ys}
}

// empty says the boot gave nothing to weigh.
func (r *reading) empty() bool { return len(r.ys) == 0 }

// prepare makes the grid for model m. The grid spans the samples and a
// reach around them that depends on them and the model alone, so that a
// boot read again (a resumed search) is read alike; centres beyond it
// are weighed from its edge (reading.at). lo and hi are the centres the
// caller will ask for: the grid is made anew only for another model.
func (r *reading) prepare(m *Model, lo, hi float64) {
	if r.empty() {
		return
	}
	g := gridModel{spread: m.Spread, nu: m.Nu, bootSpread: m.BootSpread, spikes: [2]float64{m.SpikesGood, m.SpikesBad},
		spikeSize: m.SpikeSize, spikeSpread: m.SpikeSpread}
	if r.lam[0] != nil && r.made == g {
		return
	}
	// The grid covers the samples with room for the boot-to-boot scatter
	// and a factor of e either way — below them, as far as a spike
	// rises above its boot's level (a boot of one sample that spiked
	// has its level there, not at the sample); fine enough to resolve
	// both that scatter and the samples' own pull on the level.
	reach := 7 * m.BootSpread
	below := math.Max(1, m.SpikeSize+3*m.SpikeSpread)
	g.lo, g.hi = r.ys[0]-below, r.ys[len(r.ys)-1]+1
	start, end := g.lo-reach, g.hi+reach
	step := math.Min(m.BootSpread, m.Spread/math.Sqrt(float64(len(r.ys)))) / 4
	step = math.Max(step, (end-start)/6000)
	n := int(math.Ceil((end-start)/step)) + 1
	r.lo, r.step, r.made = start, step, g
	d := m.dens()
	for a := range r.lam {
		pi := g.spikes[a]
		lam := make([]float64, n)
		for i := range lam {
			mu := start + float64(i)*step
			l, p := 0.0, 1.0
			for k, y := range r.ys {
				p *= d.at(y, mu, pi)
				if k%8 == 7 {
					l, p = l+math.Log(p), 1
				}
			}
			lam[i] = l + math.Log(p)
		}
		r.lam[a] = lam
		top := math.Inf(-1)
		for _, v := range lam {
			top = math.Max(top, v)
		}
		first, last := -1, -1
		for i, v := range lam {
			if v >= top-30 {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		r.peak[a] = [2]int{first, last}
	}
}

// at is log ∫ N(μ; c, s²) Λ_a(μ) dμ: how likely the boot's samples are
// under mode a when its level scatters by s around c. Outside the grid
// the boot's level is taken at the grid's nearest end.
func (r *reading) at(a int, c, s float64) float64 {
	lam := r.lam[a]
	reach := 7 * s
	i0 := int(math.Floor((c - reach - r.lo) / r.step))
	i1 := int(math.Ceil((c + reach - r.lo) / r.step))
	// The integrand lives where the scatter around c meets the samples'
	// pull: when they pin the level far from c (many samples), it peaks
	// at the near edge of the pull, which the window must reach.
	if p := r.peak[a]; p[0] > i1 && p[0] < len(lam) {
		i1 = p[0]
	} else if p[1] < i0 && p[1] >= 0 {
		i0 = p[1]
	}
	i0, i1 = max(i0, 0), min(i1, len(lam)-1)
	if i0 > i1 {
		// The centre lies beyond the grid: the nearest grid point,
		// weighed by how far the level must scatter to reach it.
		i := 0
		if c > r.lo {
			i = len(lam) - 1
		}
		z := (r.lo + float64(i)*r.step - c) / s
		return lam[i] - 0.5*z*z - math.Log(s) - 0.5*math.Log(2*math.Pi)
	}
	top := math.Inf(-1)
	inv := 1 / s
	for i := i0; i <= i1; i++ {
		z := (r.lo + float64(i)*r.step - c) * inv
		if v := lam[i] - 0.5*z*z; v > top {
			top = v
		}
	}
	sum := 0.0
	for i := i0; i <= i1; i++ {
		z := (r.lo + float64(i)*r.step - c) * inv
		sum += math.Exp(lam[i] - 0.5*z*z - top)
	}
	return top + math.Log(sum*r.step) - math.Log(s) - 0.5*math.Log(2*math.Pi)
}

// centre is the boot's own level under mode a: where the samples pull it
// (the grid's peak), for fits and reports.
func (r *reading) centre(a int) float64 {
	best := 0
	for i, v := range r.lam[a] {
		if v > r.lam[a][best] {
			best = i
		}
	}
	return r.lo + float64(best)*r.step
}
