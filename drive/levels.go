package drive

import (
	"math"
	"slices"
)

// scaled is a machine's samples at the pool's common level.
func (r *pooled) scaled(i int, xs []float64) []float64 {
	f := math.Exp(-r.level[i])
	out := make([]float64, len(xs))
	for j, x := range xs {
		out[j] = x * f
	}
	return out
}

// fixLevels ends calibration's levels: the machines that have both
// endpoints' boots are known; another machine's level is learned once it
// has both (learnLevel).
func (r *pooled) fixLevels() {
	r.setLevels()
	for i, e := range r.ends {
		r.known[i] = both(e)
	}
}

// learnLevel sets machine i's level against ref, once it has boots of
// both endpoints; it is then known.
func (r *pooled) learnLevel(i int) {
	if e := r.ends[i]; !r.known[i] && both(e) {
		r.level[i], r.known[i] = midpoint(e)-r.ref, true
	}
}

// both says whether a machine has boots of both endpoints.
func both(e [2][][]float64) bool { return len(e[0]) > 0 && len(e[1]) > 0 }

// midpoint is the midpoint of a machine's good and bad boots' log
// medians.
func midpoint(e [2][][]float64) float64 { return (logMedians(e[0]) + logMedians(e[1])) / 2 }

// setLevels sets ref, the mean midpoint of the machines that have both
// endpoints' boots, and each such machine's level against it (another is
// at 0, and left out of the pooled boots).
func (r *pooled) setLevels() {
	n := 0
	r.ref = 0
	for _, e := range r.ends {
		if both(e) {
			r.ref += midpoint(e)
			n++
		}
	}
	if n > 0 {
		r.ref /= float64(n)
	}
	for i, e := range r.ends {
		r.level[i] = 0
		if both(e) {
			r.level[i] = midpoint(e) - r.ref
		}
	}
}

// logMedians is the mean of the boots' log medians.
func logMedians(boots [][]float64) float64 {
	s := 0.0
	for _, xs := range boots {
		v := slices.Clone(xs)
		slices.Sort(v)
		s += math.Log(max(v[len(v)/2], 1e-300))
	}
	return s / float64(len(boots))
}

// pooledEnds are the endpoints' boots of the machines that have both,
// at the common level.
func (r *pooled) pooledEnds() (goods, bads [][]float64) {
	for i, e := range r.ends {
		if !both(e) {
			continue
		}
		for _, xs := range e[0] {
			goods = append(goods, r.scaled(i, xs))
		}
		for _, xs := range e[1] {
			bads = append(bads, r.scaled(i, xs))
		}
	}
	return goods, bads
}
