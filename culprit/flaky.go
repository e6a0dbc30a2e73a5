package culprit

import (
	"fmt"
	"math"
	"slices"
)

// FlakyOptions set a search for the first bad commit of a flaky test.
type FlakyOptions struct {
	// Confidence is the probability one commit must reach to be named
	// the first bad commit (default 0.99).
	Confidence float64
	// MaxRuns is the budget of test runs; when it runs out the search is
	// inconclusive. 0: DefaultMaxRuns of the range.
	MaxRuns int
	// Prior weighs the commits (nil: all alike).
	Prior []float64
	// RateAlpha and RateBeta are the Beta prior of the failure rate of a
	// bad commit (default 1 and 2).
	//
	// Beta(1, 2) (density 2(1−r), mean ⅓) says that a test bisected with
	// a confidence is flaky: a low rate is likelier than a high one,
	// none is ruled out. With it a pass weighs little until the runs
	// have shown the rate, and an answer at 0.99 is right 99 % of the
	// time for a test that fails one run in three (1,000 seeded
	// bisections of 1,000 commits); the uniform Beta(1, 1) is right 96 %
	// of the time there, Jeffreys' Beta(½, ½) 95 %: after a few lucky
	// failures they believe in a high rate, and take a few passes of a
	// bad commit for good ones. A test that never flakes pays with a few
	// more runs to clear the last good commit (27 against 20 with
	// Beta(1, 1), for 1,000 commits).
	RateAlpha, RateBeta float64
}

// DefaultMaxRuns is the budget of a range of n commits: 20 times the
// runs git bisect would make, plus 20. A test that fails on bad commits
// one time in two finds its culprit at 0.99 in about 4.5 times git's
// runs on average, one that fails one time in three in about 8.5 times
// and sometimes twice that: the budget leaves room for the unlucky ones,
// and stops a test that hardly ever fails.
func DefaultMaxRuns(n int) int {
	return 20*int(math.Ceil(math.Log2(float64(n+1)))) + 20
}

func (o *FlakyOptions) defaults(n int) error {
	if o.Confidence == 0 {
		o.Confidence = 0.99
	}
	if !(o.Confidence > 0.5 && o.Confidence < 1) {
		return fmt.Errorf("confidence %g is not between 0.5 and 1", o.Confidence)
	}
	if o.MaxRuns == 0 {
		o.MaxRuns = DefaultMaxRuns(n)
	}
	if o.RateAlpha == 0 && o.RateBeta == 0 {
		o.RateAlpha, o.RateBeta = 1, 2
	}
	if !(o.RateAlpha > 0 && o.RateBeta > 0) {
		return fmt.Errorf("the rate's prior Beta(%g, %g) is not a distribution", o.RateAlpha, o.RateBeta)
	}
	if o.Prior != nil && len(o.Prior) != n {
		return fmt.Errorf("a prior of %d weights for %d commits", len(o.Prior), n)
	}
	return nil
}

// FlakyRun is one run of the test the search took in: replayed in order,
// the runs rebuild the same posterior.
type FlakyRun struct {
	Commit  int  `json:"commit"`
	Failed  bool `json:"failed,omitempty"`
	Skipped bool `json:"skipped,omitempty"`
}

// Flaky is a bisection for a test that fails only sometimes on a bad
// commit. Good commits always pass; a bad commit fails with a rate r
// that is unknown, Beta-distributed a priori, and the same on every bad
// commit. The rate is integrated out in closed form (as BBChop's
// "singlerate" does): under culprit c every failing commit must be bad
// (a descendant-or-self of c), and the runs weigh c by
//
//	B(α + F, β + P_c) / B(α, β)
//
// with F the failures (all at bad commits) and P_c the passes at the
// commits bad under c. The next run goes where it says the most about
// the culprit (the mutual information of the culprit and the run's
// outcome), a commit run before included: that is how a commit is
// re-run as often as the posterior needs.
type Flaky struct {
	d        *DAG
	opt      FlakyOptions
	logPrior []float64
	// passes and fails count each commit's own runs.
	passes, fails []int
	// below counts, per culprit c, the passes at commits bad under c.
	below []float64
	// failing counts, per culprit c, the failing commits bad under c;
	// c is possible when it counts all nFailing of them.
	failing  []int
	nFailing int
	skip     []bool
	// class maps each commit to the commit whose hypothesis no run can
	// tell it from (itself, for most).
	class []int
	runs  int
	log   []FlakyRun
}

// NewFlaky starts a search over the range d. The bad endpoint (the last
// commit) is known to fail: until a run of it fails, it counts as one
// failure.
func NewFlaky(d *DAG, opt FlakyOptions) (*Flaky, error) {
	n := d.Len()
	if err := opt.defaults(n); err != nil {
		return nil, err
	}
	s := &Flaky{d: d, opt: opt, logPrior: make([]float64, n), passes: make([]int, n), fails: make([]int, n),
		below: make([]float64, n), failing: make([]int, n), nFailing: 1, skip: make([]bool, n)}
	total := 0.0
	for i := range s.logPrior {
		w := 1.0
		if opt.Prior != nil {
			w = opt.Prior[i]
		}
		if !(w >= 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("the prior weight %g of commit %d is not a weight", w, i)
		}
		s.logPrior[i] = math.Log(w)
		total += w
	}
	if !(total > 0) {
		return nil, fmt.Errorf("the prior weighs no commit")
	}
	for i := range s.logPrior {
		s.logPrior[i] -= math.Log(total)
		s.failing[i] = 1 // every commit is an ancestor of the bad endpoint
	}
	s.classes()
	return s, nil
}

// Runs is how many runs the search has taken in (skips not counted).
func (s *Flaky) Runs() int { return s.runs }

// RunsOf is how many times a commit ran, and how many of them failed.
func (s *Flaky) RunsOf(commit int) (runs, failed int) {
	return s.passes[commit] + s.fails[commit], s.fails[commit]
}

// Log is every run and skip, in order.
func (s *Flaky) Log() []FlakyRun { return slices.Clone(s.log) }

// Observe takes in one run of the test on a commit: failed or passed.
func (s *Flaky) Observe(commit int, failed bool) {
	s.runs++
	s.log = append(s.log, FlakyRun{Commit: commit, Failed: failed})
	if !failed {
		s.passes[commit]++
		s.d.eachAncestor(commit, func(c int) { s.below[c]++ })
		return
	}
	s.fails[commit]++
	if s.fails[commit] == 1 && commit != s.d.Len()-1 {
		s.nFailing++
		s.d.eachAncestor(commit, func(c int) { s.failing[c]++ })
	}
}

// Skip records that a commit cannot be tested (exit 125): it is never
// run again, and its candidacy rests on the commits around it.
func (s *Flaky) Skip(commit int) {
	s.log = append(s.log, FlakyRun{Commit: commit, Skipped: true})
	if !s.skip[commit] {
		s.skip[commit] = true
		s.classes()
	}
}

// Replay takes in a run or skip from an earlier search's log.
func (s *Flaky) Replay(r FlakyRun) error {
	if r.Commit < 0 || r.Commit >= s.d.Len() {
		return fmt.Errorf("culprit: run of commit %d in a range of %d", r.Commit, s.d.Len())
	}
	if r.Skipped {
		s.Skip(r.Commit)
	} else {
		s.Observe(r.Commit, r.Failed)
	}
	return nil
}

// failures is every failure seen, the bad endpoint's known one included.
func (s *Flaky) failures() int {
	f := 0
	for _, v := range s.fails {
		f += v
	}
	if s.fails[s.d.Len()-1] == 0 {
		f++
	}
	return f
}

// posterior is each commit's probability of being the first bad one,
// and each one's posterior mean of the failure rate; false when no
// commit explains every failure (a commit that must be good failed).
func (s *Flaky) posterior() (pc, rate []float64, ok bool) {
	n := s.d.Len()
	a := s.opt.RateAlpha + float64(s.failures())
	score := make([]float64, n)
	rate = make([]float64, n)
	top := math.Inf(-1)
	// Commits share their counts of passes in long stretches: one
	// lbeta for each stretch.
	last, lastScore := -1.0, 0.0
	for c := range score {
		rate[c] = a / (a + s.opt.RateBeta + s.below[c])
		if s.failing[c] < s.nFailing {
			score[c] = math.Inf(-1)
			continue
		}
		if s.below[c] != last {
			last, lastScore = s.below[c], lbeta(a, s.opt.RateBeta+s.below[c])
		}
		score[c] = s.logPrior[c] + lastScore
		top = math.Max(top, score[c])
	}
	if math.IsInf(top, -1) {
		return make([]float64, n), rate, false
	}
	pc = make([]float64, n)
	sum := 0.0
	for c, v := range score {
		pc[c] = math.Exp(v - top)
		sum += pc[c]
	}
	for c := range pc {
		pc[c] /= sum
	}
	return pc, rate, true
}

func lbeta(a, b float64) float64 { return lgamma(a) + lgamma(b) - lgamma(a+b) }

// Probabilities are each commit's probability of being the first bad
// one.
func (s *Flaky) Probabilities() []float64 {
	pc, _, _ := s.posterior()
	return pc
}

// Rate is the posterior mean of a bad commit's failure rate.
func (s *Flaky) Rate() float64 {
	pc, rate, _ := s.posterior()
	r := 0.0
	for c, p := range pc {
		r += p * rate[c]
	}
	return r
}

// Leading lists the most probable culprits until they hold the
// confidence's mass (at most k).
func (s *Flaky) Leading(k int) []Candidate {
	pc, _, _ := s.posterior()
	return leading(pc, s.opt.Confidence, k)
}

// Next says which commit to run next, or how the search ends.
func (s *Flaky) Next() Step {
	pc, rate, ok := s.posterior()
	conf := s.opt.Confidence
	if !ok {
		return Step{Kind: Inconclusive, Candidates: []Candidate{},
			Reason: "no single first bad commit explains where the test failed: it failed on a commit that must be good under every candidate (does it fail on good commits too?)"}
	}
	lead := leading(pc, 0, 1)[0]
	if cls, mass := s.leadingClass(pc); mass >= conf {
		if len(cls) == 1 {
			return Step{Kind: Found, Commit: cls[0].Commit, Probability: cls[0].Probability, Candidates: cls,
				Reason: fmt.Sprintf("probability %.4g after %d runs", cls[0].Probability, s.runs)}
		}
		return Step{Kind: Inconclusive, Probability: mass, Candidates: cls,
			Reason: fmt.Sprintf("the first bad commit is one of %d commits at probability %.4g after %d runs; skipped commits among them cannot be told apart", len(cls), mass, s.runs)}
	}
	if s.runs >= s.opt.MaxRuns {
		return Step{Kind: Inconclusive, Probability: lead.Probability, Candidates: leading(pc, conf, 10),
			Reason: fmt.Sprintf("the budget of %d runs ran out with no commit at probability %g (the most probable: %.3g)", s.opt.MaxRuns, conf, lead.Probability)}
	}
	x, gain := s.choose(pc, rate)
	if x < 0 || gain < 1e-9 {
		return Step{Kind: Inconclusive, Probability: lead.Probability, Candidates: leading(pc, conf, 10),
			Reason: "no commit that can be run tells the leading candidates apart (they are skipped, or next to skipped commits)"}
	}
	return Step{Kind: Measure, Commit: x, Probability: lead.Probability}
}

// choose picks the commit whose next run says the most about the
// culprit. The outcome at x depends on the culprit only through whether
// x is bad, so the mutual information is h2(P(fail)) − E[h2(rate) | x
// bad]·P(x bad): two sums over each commit's ancestors-or-self, which
// DAG.badness makes.
func (s *Flaky) choose(pc, rate []float64) (int, float64) {
	fail, spread := make([]float64, len(pc)), make([]float64, len(pc))
	last, lastH := -1.0, 0.0
	for c, p := range pc {
		if rate[c] != last {
			last, lastH = rate[c], h2(rate[c])
		}
		fail[c] = p * rate[c]
		spread[c] = p * lastH
	}
	q1, q2 := s.d.badness(fail), s.d.badness(spread)
	best, bestGain := -1, 0.0
	for x := range pc {
		if s.skip[x] {
			continue
		}
		if g := h2(q1[x]) - q2[x]; best < 0 || g > bestGain {
			best, bestGain = x, g
		}
	}
	return best, bestGain
}

// leadingClass is the most probable set of commits no run can tell
// apart, most probable first, and its probability.
func (s *Flaky) leadingClass(pc []float64) ([]Candidate, float64) {
	mass := make([]float64, len(pc))
	for c, p := range pc {
		mass[s.class[c]] += p
	}
	best, bestMass := -1, -1.0
	for c, m := range mass {
		if m > bestMass {
			best, bestMass = c, m
		}
	}
	var out []Candidate
	for c, k := range s.class {
		if k == best {
			out = append(out, Candidate{Commit: c, Probability: pc[c]})
		}
	}
	slices.SortStableFunc(out, func(a, b Candidate) int {
		switch {
		case a.Probability > b.Probability:
			return -1
		case a.Probability < b.Probability:
			return 1
		}
		return 0
	})
	return out, bestMass
}

// classes groups each skipped commit with the commits no run can tell it
// from. Culprit s makes bad the commits that can run among its
// descendants-or-self; when their oldest is one commit x, s is x as far
// as any run can say. Otherwise s is grouped with the skipped commits of
// the same oldest ones. The bad endpoint counts as one that can run: it
// is known bad.
func (s *Flaky) classes() {
	n := s.d.Len()
	s.class = make([]int, n)
	key := map[string]int{}
	for c := range s.class {
		s.class[c] = c
		if !s.skip[c] || c == n-1 {
			continue
		}
		var oldest []int
		for x := c + 1; x < n; x++ {
			if (s.skip[x] && x != n-1) || !s.d.IsAncestor(c, x) {
				continue
			}
			if !slices.ContainsFunc(oldest, func(m int) bool { return s.d.IsAncestor(m, x) }) {
				oldest = append(oldest, x)
			}
		}
		if len(oldest) == 1 {
			s.class[c] = oldest[0]
			continue
		}
		k := fmt.Sprint(oldest)
		if first, ok := key[k]; ok {
			s.class[c] = first
		} else {
			key[k] = c
		}
	}
}
