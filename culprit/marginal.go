package culprit

import (
	"cmp"
	"math"
	"slices"
)

// kernel is what one boot booted: a commit of the range (its index), the
// good endpoint (goodEndpoint), or the bad endpoint with a commit
// reverted.
type kernel struct {
	commit   int
	reverted bool
}

// goodEndpoint is the good endpoint's index: it sits before the range.
const goodEndpoint = -1

// weighed is one boot the posterior weighs: what it booted, when (its
// place among the run's boots), its reading, and at every level node the
// logs of shows·f_B + (1−shows)·f_G at each shows node (bad) and of
// wrong·f_B + (1−wrong)·f_G at each wrong node (good).
type weighed struct {
	kernel kernel
	at     int
	r      *reading
	// drift and scatter are the machine's drift at the boot and how far
	// its level may sit from its mode's (the boot spread, widened by
	// what the drift is not sure of).
	drift, scatter float64
	bad, good      []float64
}

// weigher is the posterior over the culprit: boots grouped by kernel, the
// quadrature over the levels and the shares, and for each kernel the sums
// of its boots' logs at every node. A culprit c makes every kernel bad
// that c is an ancestor-or-self of (the bad endpoint with c reverted is
// the one that is not); culprits that make the same kernels bad form a
// group, whose likelihood is the integral over levels and shares of every
// boot under that assignment — the levels' and shares' uncertainty
// carried into every boot together, not a plug-in per boot.
type weigher struct {
	d     *DAG
	m     *Model
	rates rateGrid
	prior levelPrior
	nodes []levelNode
	boots []*weighed
	// sums holds, per kernel, Σ bad and Σ good over its boots.
	sums map[kernel]*kernelSums
	// commitPrior weighs the commits (nil: alike); none is the prior of
	// no culprit.
	commitPrior []float64
	none        float64
	// laid is the belief the nodes were laid on, anchor where the boots
	// of known side put the levels.
	laid, anchor levelBelief
	// cached posterior, nil when a boot or node changed it.
	cache *groupPosterior
	// owned marks the kernels whose sums this weigher may change in
	// place (a fork shares the rest with its original).
	owned map[kernel]bool
}

type kernelSums struct {
	bad, good []float64
	boots     int
}

func newWeigher(d *DAG, m *Model, prior []float64, none float64) *weigher {
	w := &weigher{d: d, m: m, rates: newRateGrid(), prior: levelPrior{m.Good, m.Bad}, sums: map[kernel]*kernelSums{}, commitPrior: prior, none: none, owned: map[kernel]bool{}}
	w.laid = levelBelief{mean: [2]float64{m.Good, m.Bad}, cov: [2][2]float64{{0.01, 0}, {0, 0.01}}}
	w.anchor = w.laid
	w.nodes = w.laid.lay(w.anchor, w.prior, m.gap())
	return w
}

// belief is the belief the nodes were laid on.
func (w *weigher) belief() levelBelief { return w.laid }

// anchorAt sets where the boots of known side put the levels, and how
// sure that is; the nodes are laid on it from the next relay.
func (w *weigher) anchorAt(good, bad, goodSD, badSD float64) {
	w.anchor = levelBelief{mean: [2]float64{good, bad}, cov: [2][2]float64{{goodSD * goodSD, 0}, {0, badSD * badSD}}}
}

// fork is a copy that can take in boots without changing w: boots and
// sums are shared until the copy changes them. A fork never lays its
// nodes again (that would weigh the shared boots anew).
func (w *weigher) fork(m *Model) *weigher {
	f := *w
	f.m = m
	f.boots = slices.Clone(w.boots)
	f.sums = make(map[kernel]*kernelSums, len(w.sums))
	for k, v := range w.sums {
		f.sums[k] = v
	}
	f.owned = map[kernel]bool{}
	return &f
}

// width is the product of the nodes' dimensions.
func (w *weigher) width() (k, u, v int) { return len(w.nodes), len(w.rates.shows), len(w.rates.wrong) }

// add takes in a boot of kernel kn at the run's boot at, its drift and
// scatter as the machine's are believed now.
func (w *weigher) add(kn kernel, at int, r *reading, drift, scatter float64) {
	b := &weighed{kernel: kn, at: at, r: r, drift: drift, scatter: scatter}
	w.terms(b)
	w.boots = append(w.boots, b)
	w.sum(b)
	w.cache = nil
}

// terms fills a boot's logs at every node.
func (w *weigher) terms(b *weighed) {
	K, U, V := w.width()
	if len(b.bad) != K*U {
		b.bad, b.good = make([]float64, K*U), make([]float64, K*V)
	}
	if b.r.empty() {
		clear(b.bad)
		clear(b.good)
		return
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, n := range w.nodes {
		lo, hi = math.Min(lo, math.Min(n.good, n.bad)), math.Max(hi, math.Max(n.good, n.bad))
	}
	b.r.prepare(w.m, lo+b.drift, hi+b.drift)
	n := len(b.r.ys)
	c := 0.0
	if n == 1 {
		c = w.m.Crossings
	}
	flip := func(p float64) (float64, float64) {
		q := p*(1-c) + (1-p)*c
		return math.Log(q), math.Log(1 - q)
	}
	lsB, lsG := make([]float64, U), make([]float64, U)
	for u, p := range w.rates.shows {
		lsB[u], lsG[u] = flip(p)
	}
	lwB, lwG := make([]float64, V), make([]float64, V)
	for v, p := range w.rates.wrong {
		lwB[v], lwG[v] = flip(p)
	}
	for k, nd := range w.nodes {
		fg := b.r.at(0, nd.good+b.drift, b.scatter)
		fb := b.r.at(1, nd.bad+b.drift, b.scatter)
		row := b.bad[k*U : (k+1)*U]
		for u := range row {
			row[u] = logAdd(lsB[u]+fb, lsG[u]+fg)
		}
		row = b.good[k*V : (k+1)*V]
		for v := range row {
			row[v] = logAdd(lwB[v]+fb, lwG[v]+fg)
		}
	}
}

// sum adds a boot's logs to its kernel's sums.
func (w *weigher) sum(b *weighed) {
	s := w.sums[b.kernel]
	switch {
	case s == nil:
		K, U, V := w.width()
		s = &kernelSums{bad: make([]float64, K*U), good: make([]float64, K*V)}
		w.sums[b.kernel] = s
		w.owned[b.kernel] = true
	case !w.owned[b.kernel]:
		s = &kernelSums{bad: slices.Clone(s.bad), good: slices.Clone(s.good), boots: s.boots}
		w.sums[b.kernel] = s
		w.owned[b.kernel] = true
	}
	s.boots++
	for i, v := range b.bad {
		s.bad[i] += v
	}
	for i, v := range b.good {
		s.good[i] += v
	}
}

// reweigh recomputes every boot's logs (the nodes, the model or the
// drift changed) and the kernels' sums.
func (w *weigher) reweigh() {
	w.sums, w.owned = map[kernel]*kernelSums{}, map[kernel]bool{}
	for _, b := range w.boots {
		w.terms(b)
		w.sum(b)
	}
	w.cache = nil
}

// groupPosterior is the posterior over the groups of culprits, and what
// it says of each commit and of none.
type groupPosterior struct {
	pc   []float64
	none float64
	// nodeLog is, per level node, the log of its posterior mass (up to a
	// constant): where the levels are believed to be.
	nodeLog []float64
	// shows and wrong are the shares' posterior means under the leading
	// group.
	shows, wrong float64
}

// posterior computes (or returns the cached) posterior over culprits.
func (w *weigher) posterior() *groupPosterior {
	if w.cache != nil {
		return w.cache
	}
	K, U, V := w.width()
	measured, reverts := w.kernels()
	groups := w.groups(measured, reverts)
	// Sums over every kernel but the commits of the range: the good
	// endpoint's on the good side always, the reverts' on the bad side
	// but for their own culprit.
	goodSide := make([]float64, K*V)
	if s := w.sums[kernel{commit: goodEndpoint}]; s != nil {
		copy(goodSide, s.good)
	}
	revBad, revGood := make([]float64, K*U), make([]float64, K*V)
	for _, r := range reverts {
		s := w.sums[kernel{commit: r, reverted: true}]
		addTo(revBad, s.bad)
		addTo(revGood, s.good)
	}
	// Each measured commit's sums, and on a chain the suffix sums (the
	// commits from the i-th measured one on are the bad side).
	totalGood := make([]float64, K*V)
	for _, x := range measured {
		addTo(totalGood, w.sums[kernel{commit: x}].good)
	}
	var sufBad, sufGood [][]float64
	if w.d.chain {
		sufBad, sufGood = make([][]float64, len(measured)+1), make([][]float64, len(measured)+1)
		sufBad[len(measured)], sufGood[len(measured)] = make([]float64, K*U), make([]float64, K*V)
		for i := len(measured) - 1; i >= 0; i-- {
			s := w.sums[kernel{commit: measured[i]}]
			sufBad[i], sufGood[i] = slices.Clone(sufBad[i+1]), slices.Clone(sufGood[i+1])
			addTo(sufBad[i], s.bad)
			addTo(sufGood[i], s.good)
		}
	}
	sb, sg := make([]float64, K*U), make([]float64, K*V)
	logML := make([]float64, len(groups))
	nodeTerms := make([][]float64, len(groups))
	for gi := range groups {
		g := &groups[gi]
		// The bad side: the measured commits it makes bad, the reverts
		// but its own; the good side: the rest.
		switch {
		case g.none:
			clear(sb)
			copy(sg, totalGood)
			addTo(sg, goodSide)
			addTo(sg, revGood)
		case w.d.chain:
			copy(sb, sufBad[g.from])
			copy(sg, totalGood)
			subFrom(sg, sufGood[g.from])
			addTo(sg, goodSide)
			addTo(sb, revBad)
		default:
			clear(sb)
			copy(sg, totalGood)
			for _, i := range g.bad {
				s := w.sums[kernel{commit: measured[i]}]
				addTo(sb, s.bad)
				subFrom(sg, s.good)
			}
			addTo(sg, goodSide)
			addTo(sb, revBad)
		}
		if g.own >= 0 && !g.none {
			if s := w.sums[kernel{commit: g.own, reverted: true}]; s != nil {
				subFrom(sb, s.bad)
				addTo(sg, s.good)
			}
		}
		terms := make([]float64, K)
		for k := range w.nodes {
			terms[k] = w.nodes[k].logw + w.rates.marginal(sb[k*U:(k+1)*U], sg[k*V:(k+1)*V])
		}
		nodeTerms[gi] = terms
		logML[gi] = logSum(terms)
	}
	// The groups' posterior, spread over their members by the prior.
	post := make([]float64, len(groups))
	top := math.Inf(-1)
	for gi, g := range groups {
		post[gi] = logML[gi] + math.Log(g.mass)
		top = math.Max(top, post[gi])
	}
	total := 0.0
	for gi := range post {
		post[gi] = math.Exp(post[gi] - top)
		total += post[gi]
	}
	out := &groupPosterior{pc: make([]float64, w.d.Len()), nodeLog: make([]float64, K)}
	lead := 0
	for gi, g := range groups {
		p := post[gi] / total
		if p > post[lead]/total {
			lead = gi
		}
		if g.none {
			out.none = p
			continue
		}
		for _, c := range g.members {
			out.pc[c] = p * w.weight(c) / g.raw
		}
	}
	for k := range w.nodes {
		terms := make([]float64, 0, len(groups))
		for gi := range groups {
			if post[gi] > 0 {
				terms = append(terms, nodeTerms[gi][k]-logML[gi]+math.Log(post[gi]/total))
			}
		}
		out.nodeLog[k] = logSum(terms)
	}
	// The shares as the leading group has them, at the levels' best node.
	best := 0
	for k := range w.nodes {
		if nodeTerms[lead][k] > nodeTerms[lead][best] {
			best = k
		}
	}
	out.shows, out.wrong = w.sharesOf(groups[lead], measured, best)
	w.cache = out
	return out
}

// sharesOf is the shares' posterior means under group g at node k.
func (w *weigher) sharesOf(g group, measured []int, k int) (shows, wrong float64) {
	_, U, V := w.width()
	sb, sg := make([]float64, U), make([]float64, V)
	// In one order, every time: sums in a map's order round differently
	// from run to run, and a near tie of the next commit's choice would
	// then fall either way.
	kernels := make([]kernel, 0, len(w.sums))
	for kn := range w.sums {
		kernels = append(kernels, kn)
	}
	slices.SortFunc(kernels, func(a, b kernel) int {
		if a.commit != b.commit {
			return cmp.Compare(a.commit, b.commit)
		}
		return cmp.Compare(boolInt(a.reverted), boolInt(b.reverted))
	})
	for _, kn := range kernels {
		s := w.sums[kn]
		bad := false
		switch {
		case g.none || kn.commit == goodEndpoint:
		case kn.reverted:
			bad = kn.commit != g.own
		default:
			bad = w.d.IsAncestor(g.first(), kn.commit)
		}
		if bad {
			addTo(sb, s.bad[k*U:(k+1)*U])
		} else {
			addTo(sg, s.good[k*V:(k+1)*V])
		}
	}
	return w.rates.posteriorMeans(sb, sg)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// first is one member of a group: what it makes bad is what all do.
func (g group) first() int { return g.members[0] }

// weight is commit c's prior weight.
func (w *weigher) weight(c int) float64 {
	if w.commitPrior == nil {
		return 1
	}
	return w.commitPrior[c]
}

func addTo(dst, src []float64) {
	for i, v := range src {
		dst[i] += v
	}
}

func subFrom(dst, src []float64) {
	for i, v := range src {
		dst[i] -= v
	}
}

// levels is where the levels are believed to be now: the nodes'
// posterior moments.
func (w *weigher) levels() levelBelief {
	return moments(w.nodes, w.posterior().nodeLog)
}

// relay lays the level nodes again where the levels are believed to be
// now, a few times while that moves, and weighs every boot at them.
func (w *weigher) relay() {
	for range 4 {
		b := w.levels()
		old := w.belief()
		// The posterior seen through the old nodes is coarse when they
		// were spread much wider than it: do not shrink by more than
		// half at a time, and keep a floor of resolution.
		for i := range 2 {
			floor := math.Max(old.cov[i][i]/4, 1e-6)
			if b.cov[i][i] < floor {
				b.cov[i][i] = floor
			}
		}
		if c := b.cov[0][1]; c*c > 0.98*b.cov[0][0]*b.cov[1][1] {
			b.cov[0][1] = math.Copysign(math.Sqrt(0.98*b.cov[0][0]*b.cov[1][1]), c)
		}
		b.cov[1][0] = b.cov[0][1]
		moved := false
		for i := range 2 {
			sd := math.Sqrt(old.cov[i][i])
			if math.Abs(b.mean[i]-old.mean[i]) > 0.25*sd || math.Abs(math.Sqrt(b.cov[i][i])/sd-1) > 0.25 {
				moved = true
			}
		}
		if !moved {
			return
		}
		w.nodes = b.lay(w.anchor, w.prior, w.m.gap())
		w.laid = b
		w.reweigh()
	}
}
