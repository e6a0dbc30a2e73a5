package bisect

import (
	"fmt"
	"math/bits"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/verdict"
)

// StepKind says what the session wants next.
type StepKind uint8

// The kinds of step.
const (
	_ StepKind = iota
	// StepTest asks for a verdict on Step.Commit.
	StepTest
	// StepFound: Step.Commit is the first bad commit.
	StepFound
	// StepInconclusive: only skipped commits are left; the first bad
	// commit is one of Step.Candidates.
	StepInconclusive
	// StepNotReproduced: the good and bad revisions do not bound a
	// regression; Step.Reason says why.
	StepNotReproduced
)

// Step is the session's answer to "what next?".
type Step struct {
	Kind   StepKind
	Commit plumbing.Hash
	// MergeBase is set when Commit is a merge base of a good revision that
	// is not an ancestor of the bad one, and must be tested first.
	MergeBase bool
	// Left is the number of candidates left after this test, and
	// Estimate the number of steps still expected, as git prints them.
	Left, Estimate int
	// Candidates lists every possible first bad commit (inconclusive).
	Candidates []plumbing.Hash
	Reason     string
	Warnings   []string
}

// Session is one bisection: the bad revision, the good ones, the skipped
// commits, and the choice of the next commit to test exactly as git bisect
// makes it.
type Session struct {
	g           *Graph
	bad         plumbing.Hash
	goods       []plumbing.Hash // sorted by name, as git's refs/bisect/good-*
	skips       map[plumbing.Hash]bool
	firstParent bool
	ancestorsOK bool
	expected    plumbing.Hash // git's BISECT_EXPECTED_REV
	// freshStart: the first step is computed as by `git bisect start`,
	// the next ones as by a new `git bisect run` process, which has parsed
	// nothing yet. With skewed dates what git has parsed changes how far
	// it marks commits uninteresting, so the graph forgets once too.
	freshStart bool
	nexts      int
	// OnAncestorsChecked, when set, is called the first time the good
	// revisions are known to bound the range, so the state can be saved.
	OnAncestorsChecked func()
}

// NewSession starts a bisection between bad and goods.
func NewSession(g *Graph, bad plumbing.Hash, goods []plumbing.Hash, firstParent bool) *Session {
	s := &Session{g: g, bad: bad, skips: map[plumbing.Hash]bool{}, firstParent: firstParent, freshStart: true}
	for _, h := range goods {
		s.addGood(h)
	}
	return s
}

// Bad is the commit known bad that bounds the range.
func (s *Session) Bad() plumbing.Hash { return s.bad }

// Goods are the commits known good.
func (s *Session) Goods() []plumbing.Hash { return append([]plumbing.Hash(nil), s.goods...) }

// SetAncestorsChecked records that the good revisions were already checked
// against the bad one (git's BISECT_ANCESTORS_OK), when resuming.
func (s *Session) SetAncestorsChecked() { s.ancestorsOK = true }

func (s *Session) addGood(h plumbing.Hash) {
	i := sort.Search(len(s.goods), func(i int) bool { return s.goods[i].String() >= h.String() })
	if i < len(s.goods) && s.goods[i] == h {
		return
	}
	s.goods = append(s.goods, plumbing.ZeroHash)
	copy(s.goods[i+1:], s.goods[i:])
	s.goods[i] = h
}

// Fork returns a copy of the session on another graph of the same
// repository, to ask what would come next after a verdict (a build
// started ahead) without touching this session or its graph: what git
// has parsed shapes its choices, so the real session's graph must only
// see what git's would.
func (s *Session) Fork(g *Graph) *Session {
	c := &Session{g: g, bad: s.bad, goods: append([]plumbing.Hash(nil), s.goods...), skips: map[plumbing.Hash]bool{},
		firstParent: s.firstParent, ancestorsOK: s.ancestorsOK, expected: s.expected}
	for h := range s.skips {
		c.skips[h] = true
	}
	return c
}

// Mark records a verdict on commit h.
func (s *Session) Mark(h plumbing.Hash, v verdict.Verdict) error {
	switch v {
	case verdict.Good:
		s.addGood(h)
	case verdict.Bad:
		s.bad = h
	case verdict.Skip:
		s.skips[h] = true
	default:
		return fmt.Errorf("mark %s: invalid verdict %q", h, v)
	}
	return nil
}

// CheckAncestors runs git's check that the good revisions bound the range
// now, as git does when a bisection starts, before any verdict is given:
// it reports whether they do (and then records it), or otherwise leaves
// the check, with its merge-base test, to Next.
func (s *Session) CheckAncestors() (bool, error) {
	step, _, err := s.ensureAncestors()
	return err == nil && step.Kind == 0, err
}

// ensureAncestors runs the check until it passes once (git's
// BISECT_ANCESTORS_OK); a step it returns ends the bisection or asks for a
// merge base to be tested.
func (s *Session) ensureAncestors() (Step, []string, error) {
	if s.ancestorsOK || len(s.goods) == 0 {
		return Step{}, nil, nil
	}
	bad, goods, err := s.rangeNodes()
	if err != nil {
		return Step{}, nil, err
	}
	step, warnings, err := s.checkAncestors(bad, goods)
	if err != nil || step.Kind != 0 {
		if step.Kind == StepTest {
			s.expected = step.Commit
		}
		return step, nil, err
	}
	s.ancestorsOK = true
	if s.OnAncestorsChecked != nil {
		s.OnAncestorsChecked()
	}
	return Step{}, warnings, nil
}

// rangeNodes names the bad and good commits in the graph.
func (s *Session) rangeNodes() (int32, []int32, error) {
	bad := s.g.id(s.bad)
	if err := s.g.parse(bad); err != nil {
		return 0, nil, err
	}
	goods := make([]int32, len(s.goods))
	for i, h := range s.goods {
		goods[i] = s.g.id(h)
	}
	return bad, goods, nil
}

// Next computes what to do next: test a commit, or stop with an answer.
func (s *Session) Next() (Step, error) {
	g := s.g
	s.nexts++
	if s.freshStart && s.nexts == 2 {
		g.forgetParsed()
	}
	step, warnings, err := s.ensureAncestors()
	if err != nil || step.Kind != 0 {
		return step, err
	}
	bad, goods, err := s.rangeNodes()
	if err != nil {
		return Step{}, err
	}

	w := newWalk(g)
	tips := []tip{{id: bad}}
	for _, id := range goods {
		tips = append(tips, tip{id: id, uninteresting: true})
	}
	limited, err := w.limitList(tips, s.firstParent)
	if err != nil {
		return Step{}, err
	}
	bis := w.findBisection(limited, len(s.skips) > 0, s.firstParent)
	choice, tried, ok := managedSkipped(bis.order, func(id int32) bool { return s.skips[g.nodes[id].hash] }, bad)
	if !ok {
		if len(tried) > 0 {
			return Step{Kind: StepInconclusive, Candidates: s.hashes(tried), Warnings: warnings}, nil
		}
		return Step{Kind: StepNotReproduced, Warnings: warnings,
			Reason: fmt.Sprintf("%s was both good and bad: no commit is reachable from the bad revision that is not reachable from a good one", s.bad)}, nil
	}
	if choice == bad {
		if len(tried) > 0 {
			return Step{Kind: StepInconclusive, Candidates: append(s.hashes(tried), s.bad), Warnings: warnings}, nil
		}
		return Step{Kind: StepFound, Commit: s.bad, Warnings: warnings}, nil
	}
	s.expected = g.nodes[choice].hash
	return Step{
		Kind:     StepTest,
		Commit:   s.expected,
		Left:     bis.all - bis.reaches - 1,
		Estimate: estimateSteps(bis.all),
		Warnings: warnings,
	}, nil
}

// checkAncestors is git's check_good_are_ancestors_of_bad: when a good
// revision is not an ancestor of the bad one, their merge bases must be
// tested first; a bad merge base means the range holds no regression.
func (s *Session) checkAncestors(bad int32, goods []int32) (Step, []string, error) {
	g := s.g
	w := newWalk(g)
	tips := []tip{{id: bad, uninteresting: true}}
	for _, id := range goods {
		tips = append(tips, tip{id: id})
	}
	limited, err := w.limitList(tips, false)
	if err != nil {
		return Step{}, nil, err
	}
	outside := false
	for _, id := range limited {
		if w.flag(id)&flagUninteresting == 0 {
			outside = true
			break
		}
	}
	if !outside {
		return Step{}, nil, nil
	}
	bases, err := g.mergeBases(bad, goods)
	if err != nil {
		return Step{}, nil, err
	}
	var warnings []string
	for _, mb := range bases {
		h := g.nodes[mb].hash
		switch {
		case mb == bad:
			if s.bad == s.expected {
				return Step{Kind: StepNotReproduced, Reason: fmt.Sprintf(
					"the merge base %s is bad: the regression was fixed between %s and [%s], it was not introduced there",
					h, h, s.goodList())}, nil, nil
			}
			return Step{Kind: StepNotReproduced, Reason: fmt.Sprintf(
				"some good revisions are not ancestors of the bad revision %s, and %s is reachable from them: were good and bad swapped?",
				s.bad, s.bad)}, nil, nil
		case containsHash(s.goods, h):
			continue
		case s.skips[h]:
			warnings = append(warnings, fmt.Sprintf(
				"the merge base between %s and [%s] was skipped: the first bad commit may lie between %s and %s; going on anyway",
				s.bad, s.goodList(), h, s.bad))
		default:
			return Step{Kind: StepTest, Commit: h, MergeBase: true}, nil, nil
		}
	}
	return Step{}, warnings, nil
}

func (s *Session) goodList() string {
	names := make([]string, len(s.goods))
	for i, h := range s.goods {
		names[i] = h.String()
	}
	return strings.Join(names, " ")
}

func (s *Session) hashes(ids []int32) []plumbing.Hash {
	out := make([]plumbing.Hash, len(ids))
	for i, id := range ids {
		out[i] = s.g.nodes[id].hash
	}
	return out
}

func containsHash(hs []plumbing.Hash, h plumbing.Hash) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}

// estimateSteps is git's estimate_bisect_steps.
func estimateSteps(all int) int {
	if all < 3 {
		return 0
	}
	n := bits.Len(uint(all)) - 1
	e := 1 << n
	x := all - e
	if e < 3*x {
		return n
	}
	return n - 1
}
