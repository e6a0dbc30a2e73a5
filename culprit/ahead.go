package culprit

import (
	"maps"
	"math"
	"slices"
)

// Ahead says what the search may ask for after the boot step asks for:
// what Next would answer if that boot measured like a good kernel, and
// if it measured like a bad one. These are the kernels worth building
// while step's boot is measured; the search itself is not changed. A
// prediction can miss (a real boot is not a typical one), so what is
// built ahead is only ever a cache to be hit.
func (s *Search) Ahead(step Step) []Step {
	if step.Kind != Measure {
		return nil
	}
	var next []Step
	for _, level := range []float64{s.m.Good, s.m.Bad} {
		typical := make([]float64, max(s.opt.MinSamples, 1))
		for i := range typical {
			typical[i] = math.Exp(level)
		}
		f := s.fork()
		f.observe(Observation{Commit: step.Commit, Reverted: step.Reverted, Confirming: step.Confirming, Samples: typical})
		n := f.Next()
		if n.Kind != Measure || (n.Commit == step.Commit && n.Reverted == step.Reverted) {
			continue
		}
		if !slices.ContainsFunc(next, func(o Step) bool { return o.Commit == n.Commit && o.Reverted == n.Reverted }) {
			next = append(next, n)
		}
	}
	return next
}

// fork is a copy of the search that can take in boots without changing
// it. The range, the options' slices, the samples of the log and the
// gain table are shared: nothing changes them in place (a refit makes
// a new table and new evidence in the copy's own log).
func (s *Search) fork() *Search {
	f := *s
	f.post = &posterior{d: s.post.d, score: slices.Clone(s.post.score), none: s.post.none}
	f.built, f.skip, f.boots = slices.Clone(s.built), slices.Clone(s.skip), slices.Clone(s.boots)
	f.reverted, f.noRevert = maps.Clone(s.reverted), maps.Clone(s.noRevert)
	f.confirmFrom = make(map[int]map[target]int, len(s.confirmFrom))
	for c, from := range s.confirmFrom {
		f.confirmFrom[c] = maps.Clone(from)
	}
	f.log = slices.Clone(s.log)
	return &f
}
