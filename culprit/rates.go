package culprit

import (
	"math"
)

// rateGrid is the quadrature over the two shares of boots that show the
// bad mode: shows on a bad kernel, wrong on a good one (wrong < shows:
// the bad kernel is the worse one). Each is integrated over its prior on
// a grid even in its logit, which puts nodes close where the share is
// near its bounds and a few boots pin it down.
type rateGrid struct {
	shows, wrong       []float64 // the nodes
	logShows, logWrong []float64 // log prior weight × node width
	// below[u] is how many wrong nodes lie under shows[u].
	below []int
}

// The grid's extent and fineness.
const (
	showsNodes = 24
	wrongNodes = 16
)

// newRateGrid lays the nodes for boots. A priori most regressions show
// on nearly every boot and most good kernels' boots seldom land on the
// bad side: most of the prior sits there (shows ∝ r^priorPower, wrong ∝
// (1−ε)^priorPower: within a few hundredths of their bounds), and the
// rest (spreadPrior) is spread evenly over the range (an intermittent
// regression, a machine whose good boots often stray), so that a few
// boots of either are believed at once.
func newRateGrid() rateGrid {
	return layRates(showsNodes, minShows, 1-MinBadBoots, concentrated(minShows, 1-MinBadBoots, func(p float64) float64 { return math.Pow(p, priorPower) }, spreadPrior),
		wrongNodes, MinBadBoots, maxBadBoot, concentrated(MinBadBoots, maxBadBoot, func(p float64) float64 { return math.Pow(1-p, priorPower) }, spreadPrior))
}

// concentrated is a prior density on [lo, hi]: near, normalised, with a
// share even spread evenly over the range.
func concentrated(lo, hi float64, near func(float64) float64, even float64) func(float64) float64 {
	// The concentrated part normalised over [lo, hi] by a fine sum, so
	// that the split holds whatever its shape.
	total := 0.0
	const steps = 4000
	for i := 0; i < steps; i++ {
		total += near(lo + (hi-lo)*(float64(i)+0.5)/steps)
	}
	total *= (hi - lo) / steps
	return func(p float64) float64 { return (1-even)*near(p)/total + even/(hi-lo) }
}

// layRates lays both grids, each even in the logit of its share and
// weighed by its prior density.
func layRates(nShows int, showsLo, showsHi float64, showsPrior func(float64) float64, nWrong int, wrongLo, wrongHi float64, wrongPrior func(float64) float64) rateGrid {
	var g rateGrid
	lay := func(n int, lo, hi float64, prior func(float64) float64) (nodes, logw []float64) {
		a, b := logit(lo), logit(hi)
		h := (b - a) / float64(n)
		total := 0.0
		w := make([]float64, n)
		for i := 0; i < n; i++ {
			z := a + (float64(i)+0.5)*h
			p := sigmoid(z)
			nodes = append(nodes, p)
			w[i] = prior(p) * p * (1 - p) * h // dp = p(1−p) dz
			total += w[i]
		}
		for i := range w {
			logw = append(logw, math.Log(w[i]/total))
		}
		return nodes, logw
	}
	g.shows, g.logShows = lay(nShows, showsLo, showsHi, showsPrior)
	g.wrong, g.logWrong = lay(nWrong, wrongLo, wrongHi, wrongPrior)
	for _, r := range g.shows {
		k := 0
		for k < len(g.wrong) && g.wrong[k] < r {
			k++
		}
		g.below = append(g.below, k)
	}
	return g
}

// The shares' priors: priorPower shapes the part near the bounds (a
// regression on nearly every boot, good boots seldom wrong: ∝ r^50 and
// (1−ε)^50, within a few hundredths of the bounds), spreadPrior is the
// part spread evenly over the range (measured on the rows:
// 5 % believed intermittent regressions only after twenty boots of them,
// 20 % after twelve, at the cost of a boot and a half on a clean
// regression).
const (
	spreadPrior = 0.2
	priorPower  = 50.0
)

func logit(p float64) float64 { return math.Log(p / (1 - p)) }

// marginal is log ∫∫ p(shows) p(wrong) Π_bad-side [shows·f_B + (1−shows)·f_G]
// Π_good-side [wrong·f_B + (1−wrong)·f_G], given the sums over each side's
// boots of those logs at every node (sb over shows nodes, sg over wrong
// nodes), with wrong < shows.
func (g *rateGrid) marginal(sb, sg []float64) float64 {
	// In the linear domain, each side scaled by its largest term.
	topG := math.Inf(-1)
	for v, x := range sg {
		topG = math.Max(topG, g.logWrong[v]+x)
	}
	var buf [64]float64
	cum := buf[:len(sg)+1]
	if len(sg)+1 > len(buf) {
		cum = make([]float64, len(sg)+1)
	}
	cum[0] = 0
	for v, x := range sg {
		cum[v+1] = cum[v] + math.Exp(g.logWrong[v]+x-topG)
	}
	topB := math.Inf(-1)
	for u, x := range sb {
		if g.below[u] > 0 {
			topB = math.Max(topB, g.logShows[u]+x)
		}
	}
	sum := 0.0
	for u, x := range sb {
		if k := g.below[u]; k > 0 {
			sum += math.Exp(g.logShows[u]+x-topB) * cum[k]
		}
	}
	return topB + topG + math.Log(sum)
}

// posteriorMeans are the shares' means given the side sums: what a
// report says of them.
func (g *rateGrid) posteriorMeans(sb, sg []float64) (shows, wrong float64) {
	cum, cumW := make([]float64, len(sg)+1), make([]float64, len(sg)+1)
	cum[0], cumW[0] = math.Inf(-1), math.Inf(-1)
	for v := range g.wrong {
		cum[v+1] = logAdd(cum[v], g.logWrong[v]+sg[v])
		cumW[v+1] = logAdd(cumW[v], g.logWrong[v]+sg[v]+math.Log(g.wrong[v]))
	}
	total, rs, ws := math.Inf(-1), math.Inf(-1), math.Inf(-1)
	for u := range g.shows {
		k := g.below[u]
		if k == 0 {
			continue
		}
		base := g.logShows[u] + sb[u]
		total = logAdd(total, base+cum[k])
		rs = logAdd(rs, base+cum[k]+math.Log(g.shows[u]))
		ws = logAdd(ws, base+cumW[k])
	}
	return math.Exp(rs - total), math.Exp(ws - total)
}
