package report

import (
	"math"
)

// axis maps metric values to pixels along one direction of a plot.
type axis struct {
	kind string // Metric.Kind, for the tick labels
	log  bool
	// lo and hi are the domain: on a log axis positive and on decade
	// boundaries, on a linear one multiples of step.
	lo, hi float64
	step   float64
	// clamp is the smallest positive value: a log axis draws zero and
	// negative values there rather than at minus infinity.
	clamp float64
	// p0 and p1 are the pixels of lo and hi.
	p0, p1 float64
}

// decades is how far values may spread before an axis turns logarithmic:
// osnoise noise runs from a few µs on a quiet kernel to 50 ms on a bad
// one, and on a linear axis the quiet kernels would all sit on zero.
const decades = 2

// newAxis fits an axis to values, drawn from pixel p0 (lowest value) to
// p1. includeZero keeps zero on a linear axis, as bars need.
func newAxis(kind string, values []float64, includeZero bool, p0, p1 float64) axis {
	a := axis{kind: kind, p0: p0, p1: p1}
	lo, hi := math.Inf(1), math.Inf(-1)
	minPos := math.Inf(1)
	for _, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
		if v > 0 {
			minPos = math.Min(minPos, v)
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0, 1
	}
	if !math.IsInf(minPos, 1) && hi/minPos > math.Pow(10, decades) {
		a.log = true
		a.clamp = minPos
		a.lo = math.Pow(10, math.Floor(math.Log10(minPos)))
		a.hi = math.Pow(10, math.Ceil(math.Log10(hi)))
		if a.hi <= a.lo {
			a.hi = a.lo * 10
		}
		return a
	}
	if includeZero {
		lo, hi = math.Min(lo, 0), math.Max(hi, 0)
	}
	if lo == hi {
		// One value: give it room on both sides, or above zero.
		if lo == 0 {
			hi = 1
		} else {
			lo, hi = lo-math.Abs(lo)/2, hi+math.Abs(hi)/2
			if includeZero || lo < 0 && hi > 0 {
				lo, hi = math.Min(lo, 0), math.Max(hi, 0)
			}
		}
	}
	a.step = niceStep((hi - lo) / 5)
	a.lo = math.Floor(lo/a.step) * a.step
	a.hi = math.Ceil(hi/a.step) * a.step
	return a
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten, so ticks fall on
// round numbers.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if x <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// pos is the pixel of v.
func (a axis) pos(v float64) float64 {
	var t float64
	if a.log {
		if v <= 0 {
			v = a.clamp
		}
		t = (math.Log10(v) - math.Log10(a.lo)) / (math.Log10(a.hi) - math.Log10(a.lo))
	} else {
		t = (v - a.lo) / (a.hi - a.lo)
	}
	return a.p0 + t*(a.p1-a.p0)
}

// base is the pixel bars grow from: zero on a linear axis, the bottom of
// a log one.
func (a axis) base() float64 {
	if a.log {
		return a.p0
	}
	return a.pos(math.Max(a.lo, math.Min(0, a.hi)))
}

// ticks are the values that get a grid line and a label.
func (a axis) ticks() []float64 {
	var ts []float64
	if a.log {
		first, last := int(math.Round(math.Log10(a.lo))), int(math.Round(math.Log10(a.hi)))
		// Every decade while that makes no more than eight labels.
		every := (last - first + 7) / 8
		for e := first; e <= last; e += every {
			ts = append(ts, math.Pow(10, float64(e)))
		}
		return ts
	}
	n := int(math.Round((a.hi - a.lo) / a.step))
	for i := 0; i <= n; i++ {
		ts = append(ts, a.lo+float64(i)*a.step)
	}
	return ts
}

// label writes a tick value. A linear axis writes all its ticks in the
// unit of its largest one with the decimals its step needs (0.5 ms, 1 ms,
// 1.5 ms). A log axis writes each decade in its own unit, since one unit
// across five decades would read "100,000 µs" or "0.001 ms".
func (a axis) label(v float64) string {
	m := Metric{Kind: a.kind}
	if a.log {
		return m.Format(v)
	}
	u := unitFor(a.kind, math.Max(math.Abs(a.lo), math.Abs(a.hi)))
	if a.kind == "percent" || a.kind == "time" {
		decimals := max(0, int(math.Ceil(-math.Log10(a.step/u.scale)-1e-9)))
		return fixed(v/u.scale, decimals) + " " + u.suffix
	}
	decimals := max(0, int(math.Ceil(-math.Log10(a.step)-1e-9)))
	return fixed(v, decimals)
}
