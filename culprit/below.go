package culprit

import (
	"fmt"
	"math"
)

// A search that converged on the later of two steps (its candidate's
// parent measures clearly worse than the good endpoint) goes on below
// it: a second search over the parent's ancestors in the range, the
// parent its bad endpoint at the level its boots measured, every boot so
// far of those commits and of the good endpoint its evidence. The
// second search names the first step, and lists the first search's
// candidate as the later one; where it cannot, the run ends inconclusive
// as before, never with the commit between the steps.
//
// The search then delegates to the second one, its commits mapped: the
// second search's commit i is the range's outer[i], its bad endpoint the
// parent. Boots of kernels outside it (the first search's bad endpoint, a
// commit after the parent, a revert: a boot under way on another machine
// when it began) are kept in the log and pass its time.
type below struct {
	s *Search
	// outer is the range's commit of each of the second search's, and
	// inner the reverse (-1: not in it).
	outer []int
	inner []int32
	// later is the first search's candidate, the later step, and lead
	// its probability when the second search began.
	later int
	lead  float64
}

// descend begins the second search below parent, of candidate c whose
// parent measures worse than the good endpoint; false when it cannot:
// a copy of the search looking ahead, a second search that cannot be
// made, or a parent whose boots do not sit between the sides as a first
// step does — their median (boots' levels with heavy tails: one boot far
// off moves a mean) less than half a step's share of the way from the
// good endpoint's, or nearer the bad endpoint's than a step's share. Such
// a parent ends the run inconclusive, as the check says: searched below
// it, the one far-off boot taken for its level makes every commit there
// look good. Half a share: earlierStep showed the parent a step above
// the good endpoint, by its boots' weighed mean, beyond doubt; a first
// step just past the share has half its parents' medians short of it
// (7 → 8.5 → 15 µs: the parent a quarter of the way).
func (s *Search) descend(c, parent int, lead float64) bool {
	if s.frozen || s.sub != nil {
		return false
	}
	// The parent is a step above the good endpoint (earlierStep said so,
	// beyond doubt): it must not be the bad side's level too.
	up, span := s.way(kernel{commit: parent})
	if up < halfShare(span) || up > (1-stepShare)*span {
		return false
	}
	m := s.m
	m.Bad = m.Good + up*math.Copysign(1, s.m.Bad-s.m.Good)
	n := s.d.Len()
	b := &below{inner: make([]int32, n), later: c, lead: lead}
	var parents [][]int
	for i := 0; i < n; i++ {
		b.inner[i] = -1
		if !s.d.IsAncestor(i, parent) {
			continue
		}
		b.inner[i] = int32(len(b.outer))
		var ps []int
		for _, p := range s.d.parents[i] {
			ps = append(ps, int(b.inner[p]))
		}
		b.outer = append(b.outer, i)
		parents = append(parents, ps)
	}
	d, err := NewDAG(parents)
	if err != nil {
		return false
	}
	opt := s.opt
	opt.Revert, opt.MaxBoots = false, 0
	if opt.Prior != nil {
		opt.Prior = make([]float64, len(b.outer))
		for k, i := range b.outer {
			opt.Prior[k] = s.opt.Prior[i]
		}
	}
	inner, err := New(d, m, opt)
	if err != nil {
		return false
	}
	inner.opt.Costs = s.opt.Costs
	for i := range s.built {
		if s.built[i] {
			inner.Built(int(b.inner[i]))
		}
	}
	b.s = inner
	for _, o := range s.log {
		// The first search's boots are plain evidence: none of them
		// is the second search's confirmation.
		o.Confirming = false
		b.take(o, false)
	}
	// It counts the run's boots as the search does, and its budget is
	// its own range's past them (or the budget given, of the whole run).
	inner.total = s.total
	if s.budget {
		inner.opt.MaxBoots += s.total
	} else {
		inner.opt.MaxBoots, inner.budget = s.opt.MaxBoots, false
	}
	s.sub = b
	return true
}

// in is an observation of the range as the second search has it; false
// when it is not of a kernel of it.
func (b *below) in(o Observation) (Observation, bool) {
	switch {
	case o.Reverted:
		return o, false
	case o.Commit == goodEndpoint:
		return o, true
	case o.Commit < 0 || o.Commit >= len(b.inner) || b.inner[o.Commit] < 0:
		return o, false
	}
	o.Commit = int(b.inner[o.Commit])
	return o, true
}

// take gives the second search an observation of the range's, and says
// what it said: replay says it is a resumed run's (the second search
// takes it in as Replay does).
func (b *below) take(o Observation, replay bool) float64 {
	io, ok := b.in(o)
	switch {
	case !ok && !o.Skipped:
		b.s.runBoots++ // the machine's time passes
		return 0
	case !ok:
		return 0
	case replay:
		b.s.Replay(io)
	default:
		b.s.observe(io)
	}
	if io.Skipped {
		return 0
	}
	return b.s.log[len(b.s.log)-1].Evidence
}

// keep records an observation in the search's counts and its log (the
// second search, when there is one, weighs it).
func (s *Search) keep(o Observation) {
	switch {
	case o.Skipped && o.Reverted:
		s.noRevert[o.Commit] = true
	case o.Skipped:
		if o.Commit >= 0 {
			s.skip[o.Commit] = true
		}
	default:
		s.runBoots++
		if !o.Endpoint {
			s.total++
		}
		switch {
		case o.Commit == goodEndpoint:
			s.goodBoots++
		case o.Reverted:
			s.reverted[o.Commit]++
		default:
			s.built[o.Commit] = true
			s.boots[o.Commit]++
		}
	}
	s.log = append(s.log, o)
}

// step is a step of the second search as the range has it.
func (b *below) step(st Step) Step {
	if st.Commit != goodEndpoint {
		st.Commit = b.outer[st.Commit]
	}
	st.Candidates = b.candidates(st.Candidates)
	for k, l := range st.Later {
		st.Later[k] = b.outer[l]
	}
	return st
}

func (b *below) candidates(cs []Candidate) []Candidate {
	out := make([]Candidate, len(cs))
	for k, c := range cs {
		out[k] = Candidate{Commit: b.outer[c.Commit], Probability: c.Probability}
	}
	return out
}

// next is the second search's next step, as the range has it: the
// answer names the first step and lists the later; a second search that
// finds no bad commit below the parent ends inconclusive, the later step
// the candidate at the probability the first search gave it (the parent
// measured worse than the good endpoint, and the boots below it could
// not tell why).
func (b *below) next() Step {
	st := b.step(b.s.Next())
	if st.Kind == Measure {
		return st
	}
	first := fmt.Sprintf("the search first converged on a later step, whose parent measured %s the good endpoint; searched again below that parent (its ancestors in the range, %d commits)", pct(b.s.m.Bad-b.s.m.Good), len(b.outer))
	switch st.Kind {
	case Found:
		st.Later = append(st.Later, b.later)
		st.Reason = st.Reason + "; the first of two steps: " + first
	case NotReproduced:
		st.Kind = Inconclusive
		st.Candidates = []Candidate{{Commit: b.later, Probability: b.lead}}
		st.Reason = first + ", and found no bad commit there: " + st.Reason
	default:
		st.Reason = first + ": " + st.Reason
	}
	return st
}

// stepIn is a step of the range as the second search has it; false when
// it is not of a kernel of it.
func (b *below) stepIn(st Step) (Step, bool) {
	o, ok := b.in(Observation{Commit: st.Commit, Reverted: st.Reverted})
	st.Commit = o.Commit
	return st, ok
}

// probabilities are the second search's, as the range has them: no
// commit outside it is the culprit.
func (b *below) probabilities(n int) ([]float64, float64) {
	pc, none := b.s.Probabilities()
	out := make([]float64, n)
	for k, p := range pc {
		out[b.outer[k]] = p
	}
	return out, none
}

func (b *below) fork() *below {
	f := *b
	f.s = b.s.fork()
	return &f
}

// ahead is Ahead of the second search, as the range has it.
func (b *below) ahead(st Step, slots int) []Step {
	in, ok := b.stepIn(st)
	if !ok {
		return nil
	}
	var out []Step
	for _, a := range b.s.Ahead(in, slots) {
		out = append(out, b.step(a))
	}
	return out
}

// beside is Beside of the second search, as the range has it.
func (b *below) beside(pending []Step) (Step, bool) {
	var in []Step
	for _, p := range pending {
		if st, ok := b.stepIn(p); ok {
			in = append(in, st)
		}
	}
	st, ok := b.s.Beside(in)
	return b.step(st), ok
}
