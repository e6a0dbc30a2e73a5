package culprit

import "math"

// settle forgets the confirmation of every candidate that does not lead
// at the confidence now: should it lead again, its fresh boots start
// again, so that a confirmation is boots in a row that agree. Next does
// it before each step, and Replay before each observation, alike.
func (s *Search) settle(lead Candidate) {
	for c := range s.confirmFrom {
		if c != lead.Commit || lead.Probability < s.opt.Confidence {
			delete(s.confirmFrom, c)
		}
	}
}

// confirmNext is the next kernel the confirmation of c needs, parents
// first, then c, then the bad endpoint without c, so that they alternate;
// false when each has had its fresh boots.
func (s *Search) confirmNext(c int) (target, bool) {
	targets := []target{}
	for _, p := range s.d.parents[c] {
		if !s.skip[p] {
			targets = append(targets, target{commit: int(p)})
		}
	}
	targets = append(targets, target{commit: c})
	if s.opt.Revert && c != s.d.Len()-1 && !s.noRevert[c] {
		targets = append(targets, target{commit: c, reverted: true})
	}
	from := s.confirmFrom[c]
	if from == nil {
		from = map[target]int{}
		for _, t := range targets {
			from[t] = s.count(t)
		}
		s.confirmFrom[c] = from
	}
	best, fewest := target{}, math.MaxInt
	for _, t := range targets {
		if _, ok := from[t]; !ok {
			from[t] = s.count(t)
		}
		if fresh := s.count(t) - from[t]; fresh < s.opt.ConfirmBoots && fresh < fewest {
			best, fewest = t, fresh
		}
	}
	return best, fewest != math.MaxInt
}

func (s *Search) count(t target) int {
	if t.reverted {
		return s.reverted[t.commit]
	}
	return s.boots[t.commit]
}

type target struct {
	commit   int
	reverted bool
}
