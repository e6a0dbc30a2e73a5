package culprit

import (
	"maps"
	"math"
	"slices"
)

// Ahead says what the search may ask for after the boot step asks for,
// for slots builds at once: what Next would answer if that boot measured
// like a good kernel, and if it measured like a bad one, and with more
// slots what it would answer after those boots too, to the depth of
// log2(slots+1) verdicts (1 slot or 2: the next verdict's two kernels; 3
// to 6: the next two verdicts' six; 7 to 14: three's fourteen). These
// are the kernels worth building while step's boot is measured, nearest
// first (the next verdict's before the one after it), each once; the
// search itself is not changed. A prediction can miss (a real boot is
// not a typical one), so what is built ahead is only ever a cache to be
// hit.
func (s *Search) Ahead(step Step, slots int) []Step {
	if step.Kind != Measure {
		return nil
	}
	if s.sub != nil {
		return s.sub.ahead(step, slots)
	}
	depth := 1
	for 1<<(depth+1)-1 <= slots {
		depth++
	}
	type node struct {
		s    *Search
		step Step
	}
	same := func(a, b Step) bool { return a.Commit == b.Commit && a.Reverted == b.Reverted }
	var next []Step
	level := []node{{s, step}}
	for range depth {
		var deeper []node
		for _, at := range level {
			for _, lv := range []float64{at.s.m.Good, at.s.m.Bad} {
				if at.step.Commit == goodEndpoint && lv == at.s.m.Bad {
					continue // a control boot says nothing of the culprit
				}
				f := at.s.fork()
				dr, _ := f.drift.at(f.runBoots)
				f.observe(Observation{Commit: at.step.Commit, Reverted: at.step.Reverted, Confirming: at.step.Confirming, Samples: typical(lv+dr, f.opt.MinSamples)})
				n := f.Next()
				if n.Kind != Measure {
					continue
				}
				// A boot of the same kernel again needs no build, but
				// what follows it may.
				deeper = append(deeper, node{f, n})
				if n.Commit == goodEndpoint {
					continue // built before the search began
				}
				if !same(n, step) && !slices.ContainsFunc(next, func(o Step) bool { return same(o, n) }) {
					next = append(next, n)
				}
			}
		}
		level = deeper
	}
	return next
}

// typical is a boot's samples at a level of log-noise, as many as the
// search asks of a boot at least.
func typical(level float64, n int) []float64 {
	xs := make([]float64, max(n, 1))
	for i := range xs {
		xs[i] = math.Exp(level)
	}
	return xs
}

// fork is a copy of the search that can take in boots without changing
// it: the boots taken in so far are shared (the weigher's fork), and the
// copy never learns its model again (frozen), which would weigh them
// anew.
func (s *Search) fork() *Search {
	f := *s
	f.w = s.w.fork(&f.m)
	f.frozen = true
	f.built, f.skip, f.boots = slices.Clone(s.built), slices.Clone(s.skip), slices.Clone(s.boots)
	f.reverted, f.noRevert = maps.Clone(s.reverted), maps.Clone(s.noRevert)
	f.confirmFrom = make(map[int]map[target]int, len(s.confirmFrom))
	for c, from := range s.confirmFrom {
		f.confirmFrom[c] = maps.Clone(from)
	}
	f.extra, f.stepExtra, f.laterExtra, f.checked = maps.Clone(s.extra), maps.Clone(s.stepExtra), maps.Clone(s.laterExtra), maps.Clone(s.checked)
	f.log = slices.Clone(s.log)
	if s.sub != nil {
		f.sub = s.sub.fork()
	}
	return &f
}
