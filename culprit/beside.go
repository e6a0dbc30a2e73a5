package culprit

import "math"

// Beside is a commit to boot on one machine while the kernels of pending
// boot on others (a pool of machines, one posterior): of the commits at
// each 64th of the posterior's badness, the one that with the pending
// commits splits the culprits into the most even parts — the entropy of
// which of them would be bad, as if every boot were sure — and is not one
// of them and can be built. False when none adds besideGain to the
// pending commits' own split (the culprits are among them, or a range of
// a few commits is all under way).
func (s *Search) Beside(pending []Step) (Step, bool) {
	if s.sub != nil {
		return s.sub.beside(pending)
	}
	s.least = 0
	pc, none := s.Probabilities()
	n := s.d.Len()
	taken := make(map[int]bool, len(pending))
	var xs []int
	for _, p := range pending {
		if !p.Reverted && p.Commit >= 0 && p.Commit < n {
			taken[p.Commit] = true
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
	for x, v := range q {
		if s.skip[x] || taken[x] || x == n-1 {
			continue
		}
		b := int(math.Round(v * parts))
		if near[b] < 0 || math.Abs(q[near[b]]*parts-float64(b)) > math.Abs(v*parts-float64(b)) {
			near[b] = x
		}
	}
	base := s.splitEntropy(xs, pc, none)
	best, bestH := -1, base+besideGain
	for _, x := range near {
		if x < 0 {
			continue
		}
		if h := s.splitEntropy(sortedInsert(xs, x), pc, none); h > bestH {
			best, bestH = x, h
		}
	}
	if best < 0 {
		return Step{}, false
	}
	return Step{Kind: Measure, Commit: best, Probability: leading(pc, 0, 1)[0].Probability}, true
}

// besideGain is the least a commit beside the pending ones must add to
// the entropy of their split (in nats): below it, the culprits are
// among commits under way, and another boot of one of them tells more.
const besideGain = 0.1

// splitEntropy is the entropy of the parts the culprits fall in by which
// of the commits xs (sorted) they make bad; "none" makes none bad.
func (s *Search) splitEntropy(xs []int, pc []float64, none float64) float64 {
	of, sigs := s.d.signatures(xs)
	mass := make([]float64, len(sigs))
	for c, p := range pc {
		mass[of[c]] += p
	}
	empty := -1
	for i, sig := range sigs {
		if isEmpty(sig) {
			empty = i
		}
	}
	h := 0.0
	if empty < 0 {
		h -= xlogx(none)
	} else {
		mass[empty] += none
	}
	for _, m := range mass {
		h -= xlogx(m)
	}
	return h
}

func isEmpty(sig string) bool {
	for i := 0; i < len(sig); i++ {
		if sig[i] != 0 {
			return false
		}
	}
	return true
}

func xlogx(m float64) float64 {
	if m <= 0 {
		return 0
	}
	return m * math.Log(m)
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
