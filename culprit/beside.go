package culprit

import "math"

// Beside is a commit to boot on one machine while the kernels of pending
// boot on others (a pool of machines, one posterior): the one whose boot,
// beside theirs, tells the most about the culprit per second. What a boot
// tells is weighed as the model says boots err (bootError), not as if it
// were sure: beside noisy boots, another boot of a commit under way can
// tell more than a new split, and a commit built already costs no build
// (one under way for the first time costs one: its boot waits for it).
// The commits weighed are those nearest each 64th of the posterior's
// badness, the commits under way, and the built ones still unsure; not
// the bad endpoint. False when none tells minGain.
func (s *Search) Beside(pending []Step) (Step, bool) {
	if s.sub != nil {
		return s.sub.beside(pending)
	}
	s.least = 0
	pc, none := s.Probabilities()
	n := s.d.Len()
	underWay := make(map[int]bool, len(pending))
	var xs []int
	for _, p := range pending {
		if !p.Reverted && p.Commit >= 0 && p.Commit < n {
			underWay[p.Commit] = true
			xs = append(xs, p.Commit)
		}
	}
	// The commit nearest each 64th of the badness, one pass.
	const parts = 64
	q := s.d.badness(pc)
	near := make([]int, parts+1)
	for i := range near {
		near[i] = -1
	}
	unsure := h2(unsureAt)
	seen := map[int]bool{}
	var cands []int
	add := func(x int) {
		if x >= 0 && !seen[x] {
			seen[x] = true
			cands = append(cands, x)
		}
	}
	for x, v := range q {
		if s.skip[x] || x == n-1 {
			continue
		}
		if (s.built[x] || underWay[x]) && h2(v) > unsure {
			add(x)
		}
		b := int(math.Round(v * parts))
		if near[b] < 0 || math.Abs(q[near[b]]*parts-float64(b)) > math.Abs(v*parts-float64(b)) {
			near[b] = x
		}
	}
	for _, x := range near {
		add(x)
	}
	e := s.bootError()
	base := s.outcomeEntropy(xs, pc, none, e)
	boot := s.opt.Costs.Boot + float64(s.opt.MinSamples)*s.opt.Costs.Sample
	best, bestValue := -1, 0.0
	for _, x := range cands {
		g := s.outcomeEntropy(sortedInsert(xs, x), pc, none, e) - base - h2(e)
		if g < minGain {
			continue
		}
		cost := boot
		if !s.built[x] {
			// New to the cache, or under way on a machine that may still
			// be building it: the boot waits for a build.
			cost += s.opt.Costs.Build
		}
		if v := g / math.Max(cost, 1e-9); v > bestValue {
			best, bestValue = x, v
		}
	}
	if best < 0 {
		return Step{}, false
	}
	return Step{Kind: Measure, Commit: best, Probability: leading(pc, 0, 1)[0].Probability}, true
}

// bootError is how often one boot of the least samples reads the wrong
// side, as the model believes boots scatter: the error of the binary
// channel that tells as much, at even odds, as the gain table says such
// a boot does.
func (s *Search) bootError() float64 {
	g := s.gain.at(0.5)
	if g >= 1 {
		return 0
	}
	lo, hi := 0.0, 0.5
	for range 40 {
		if mid := (lo + hi) / 2; h2(mid) < 1-g {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// outcomeEntropy is the entropy, in bits, of what boots of the commits
// xs (sorted; one may be there twice) would read, each bad as the
// culprit makes it and read wrong with probability e apart from the
// others; "none" makes none bad.
func (s *Search) outcomeEntropy(xs []int, pc []float64, none, e float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	of, sigs := s.d.signatures(xs)
	mass := make([]float64, len(sigs)+1)
	for c, p := range pc {
		mass[of[c]] += p
	}
	mass[len(sigs)] = none // every bit off
	m := len(xs)
	h := 0.0
	for o := 0; o < 1<<m; o++ {
		p := 0.0
		for i, w := range mass {
			if w == 0 {
				continue
			}
			f := w
			for j := range m {
				bad := i < len(sigs) && sigs[i][j/8]&(1<<(j%8)) != 0
				if read := o&(1<<j) != 0; read == bad {
					f *= 1 - e
				} else {
					f *= e
				}
			}
			p += f
		}
		if p > 0 {
			h -= p * math.Log2(p)
		}
	}
	return h
}

// sortedInsert is xs (sorted) with x, sorted, in a new slice.
func sortedInsert(xs []int, x int) []int {
	out := make([]int, 0, len(xs)+1)
	i := 0
	for ; i < len(xs) && xs[i] < x; i++ {
		out = append(out, xs[i])
	}
	out = append(out, x)
	return append(out, xs[i:]...)
}
