package culprit

import "math"

// levelNode is one point of the quadrature over the two modes' levels
// (good, bad, on the log scale) and its log weight: the Gauss–Hermite
// weight over the density it was laid on, times the levels' prior.
type levelNode struct {
	good, bad, logw float64
}

// levelBelief is a Gaussian over the two levels: where the quadrature's
// nodes are laid.
type levelBelief struct {
	mean [2]float64
	cov  [2][2]float64
}

// Gauss–Hermite nodes and weights for a standard normal: 5 points
// (exact for polynomials to degree 9 times the normal density) for where
// the levels are believed to be, 3 for the anchor, 4 for where the
// prior allows them.
var (
	hermite5Nodes   = [...]float64{-2.856970013872806, -1.355626179974266, 0, 1.355626179974266, 2.856970013872806}
	hermite5Weights = [...]float64{0.011257411327720691, 0.22207592200561266, 0.5333333333333333, 0.22207592200561266, 0.011257411327720691}
	hermite4Nodes   = [...]float64{-2.334414218338977, -0.7419637843027258, 0.7419637843027258, 2.334414218338977}
	hermite4Weights = [...]float64{0.04587585476806849, 0.4541241452319315, 0.4541241452319315, 0.04587585476806849}
)

// The shares of each level's nodes: laid where the posterior believes
// the level is; where the boots of known side put it (the endpoints',
// and those of commits the evidence has decided: an anchor no
// hypothesis moves, so that one whose levels sit elsewhere than the
// leading one's is still integrated where its levels are); and over the
// prior's reach (a hypothesis under which no boot shows a mode leaves
// that level to the prior).
const (
	believed = 0.5
	anchored = 0.3
)

var (
	hermite3Nodes   = [...]float64{-1.7320508075688772, 0, 1.7320508075688772}
	hermite3Weights = [...]float64{1.0 / 6, 2.0 / 3, 1.0 / 6}
)

// levelPrior is the prior of the levels: each around where calibration
// put it, wide enough that the boots decide (σ of 1.5, a factor of
// about 4.5 either way).
type levelPrior struct{ good, bad float64 }

const levelPriorSpread = 1.5

func (p levelPrior) log(good, bad float64) float64 {
	zg, zb := (good-p.good)/levelPriorSpread, (bad-p.bad)/levelPriorSpread
	return -0.5*(zg*zg+zb*zb) - math.Log(2*math.Pi*levelPriorSpread*levelPriorSpread)
}

// axis is one level's nodes and log weights: Gauss–Hermite nodes of the
// belief, of the anchor and of the prior, each weighed as importance
// sampling from their mixture would weigh it (the mixture's density
// divided out), so that Σ w·f integrates f over the level wherever the
// hypothesis puts it.
func axis(mean, sd, anchor, anchorSD, priorMean float64) (x, logw []float64) {
	normal := func(v, m, s float64) float64 {
		z := (v - m) / s
		return math.Exp(-0.5*z*z) / (s * math.Sqrt(2*math.Pi))
	}
	mix := func(v float64) float64 {
		return believed*normal(v, mean, sd) + anchored*normal(v, anchor, anchorSD) + (1-believed-anchored)*normal(v, priorMean, levelPriorSpread)
	}
	add := func(share, m, s float64, nodes, weights []float64) {
		for i, z := range nodes {
			v := m + s*z
			x = append(x, v)
			logw = append(logw, math.Log(share*weights[i]/mix(v)))
		}
	}
	add(believed, mean, sd, hermite5Nodes[:], hermite5Weights[:])
	add(anchored, anchor, anchorSD, hermite3Nodes[:], hermite3Weights[:])
	add(1-believed-anchored, priorMean, levelPriorSpread, hermite4Nodes[:], hermite4Weights[:])
	return x, logw
}

// lay puts the quadrature's nodes on the belief, the anchor and the
// prior, level by level (the belief's correlation between the levels is
// not used: the nodes only need to cover where each level may be), each
// node weighed by both axes' weights and the prior. The bad mode's level
// is above the good one's by more than gap: unless the modes differ in
// how often they spike, strictly above (gap 0) — a bad mode at the good
// level and with its spikes would be no regression at all, and would
// explain every boot as well as "none"; when they do, it may sit at the
// good level but not below it (gap of minus two boot spreads).
func (b levelBelief) lay(anchor levelBelief, prior levelPrior, gap float64) []levelNode {
	sd := func(c levelBelief, i int) float64 { return math.Sqrt(math.Max(c.cov[i][i], 1e-12)) }
	gx, gw := axis(b.mean[0], sd(b, 0), anchor.mean[0], sd(anchor, 0), prior.good)
	bx, bw := axis(b.mean[1], sd(b, 1), anchor.mean[1], sd(anchor, 1), prior.bad)
	nodes := make([]levelNode, 0, len(gx)*len(bx))
	for i, g := range gx {
		for j, bd := range bx {
			if bd-g <= gap {
				continue
			}
			nodes = append(nodes, levelNode{good: g, bad: bd, logw: gw[i] + bw[j] + prior.log(g, bd)})
		}
	}
	return nodes
}

// moments is the Gaussian of the nodes weighed by their posterior mass.
func moments(nodes []levelNode, logp []float64) levelBelief {
	top := math.Inf(-1)
	for _, v := range logp {
		top = math.Max(top, v)
	}
	var b levelBelief
	sum := 0.0
	w := make([]float64, len(nodes))
	for k, n := range nodes {
		w[k] = math.Exp(logp[k] - top)
		sum += w[k]
		b.mean[0] += w[k] * n.good
		b.mean[1] += w[k] * n.bad
	}
	b.mean[0] /= sum
	b.mean[1] /= sum
	for k, n := range nodes {
		dg, db := n.good-b.mean[0], n.bad-b.mean[1]
		b.cov[0][0] += w[k] * dg * dg
		b.cov[1][1] += w[k] * db * db
		b.cov[0][1] += w[k] * dg * db
	}
	for i := range b.cov {
		for j := range b.cov[i] {
			b.cov[i][j] /= sum
		}
	}
	b.cov[1][0] = b.cov[0][1]
	return b
}
