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
	// inconclusive. 0: DefaultMaxRuns of the range, or more for a test
	// whose runs tell little (Flaky's budget).
	MaxRuns int
	given   bool
	// Prior weighs the commits (nil: all alike).
	Prior []float64
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
	o.given = o.MaxRuns != 0
	if o.MaxRuns == 0 {
		o.MaxRuns = DefaultMaxRuns(n)
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
// commit, and may fail now and then on good ones too (a base flake
// rate). A bad commit fails with a rate r, a good one with a rate ε;
// both are unknown, the same on every commit of their side, and
// integrated over their priors in closed form: under culprit c the runs
// weigh c by
//
//	∫∫ r^F_c (1−r)^P_c ε^(F−F_c) (1−ε)^(P−P_c) p(r) p(ε) dr dε
//
// with F_c and P_c the failures and passes at the commits bad under c,
// F and P all of them (the good endpoint's runs among them). The next
// run goes where it says the most about the culprit (the mutual
// information of the culprit and the run's outcome), a commit run
// before included: that is how a commit is re-run as often as the
// posterior needs.
type Flaky struct {
	d   *DAG
	opt FlakyOptions
	// logPrior is each commit's log prior weight.
	logPrior []float64
	// passes and fails count each commit's own runs.
	passes, fails []int
	// goodPasses and goodFails count the good endpoint's runs.
	goodPasses, goodFails int
	// below and failedBelow count, per culprit c, the passes and the
	// failures at the commits bad under c.
	below, failedBelow []float64
	skip               []bool
	// class maps each commit to the commit whose hypothesis no run can
	// tell it from (itself, for most).
	class []int
	runs  int
	log   []FlakyRun
	// confirmFrom is, for a candidate that reached the confidence, each
	// of its confirmation's commits' runs then.
	confirmFrom map[int]map[int]int
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
		below: make([]float64, n), failedBelow: make([]float64, n), skip: make([]bool, n), confirmFrom: map[int]map[int]int{}}
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

// Observe takes in one run of the test on a commit (GoodEndpoint: on the
// good endpoint): failed or passed.
func (s *Flaky) Observe(commit int, failed bool) {
	s.runs++
	s.log = append(s.log, FlakyRun{Commit: commit, Failed: failed})
	if commit == goodEndpoint {
		if failed {
			s.goodFails++
		} else {
			s.goodPasses++
		}
		return
	}
	if failed {
		s.fails[commit]++
		s.d.eachAncestor(commit, func(c int) { s.failedBelow[c]++ })
		return
	}
	s.passes[commit]++
	s.d.eachAncestor(commit, func(c int) { s.below[c]++ })
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
	if (r.Commit < 0 && !(r.Commit == goodEndpoint && !r.Skipped)) || r.Commit >= s.d.Len() {
		return fmt.Errorf("culprit: run of commit %d in a range of %d", r.Commit, s.d.Len())
	}
	// As Next did before it chose this run: a candidate at the
	// confidence begins (or keeps) its confirmation.
	pc, rate, base := s.posterior()
	cls, mass := s.leadingClass(pc)
	s.settle(cls, mass)
	if mass >= s.opt.Confidence && len(cls) == 1 {
		s.confirmNext(cls[0].Commit, rate, base)
	}
	if r.Skipped {
		s.Skip(r.Commit)
	} else {
		s.Observe(r.Commit, r.Failed)
	}
	return nil
}

// posterior is each commit's probability of being the first bad one,
// and under each the posterior means of the two failure rates (on a bad
// commit, on a good one).
func (s *Flaky) posterior() (pc, rate, base []float64) {
	n := s.d.Len()
	fails, passes := float64(s.goodFails), float64(s.goodPasses)
	for c := range s.fails {
		fails += float64(s.fails[c])
		passes += float64(s.passes[c])
	}
	// The bad endpoint is known to fail: until a run of it has, it
	// counts as one failure, on the bad side under every culprit.
	known := 0.0
	if s.fails[n-1] == 0 {
		known = 1
	}
	score := make([]float64, n)
	rate, base = make([]float64, n), make([]float64, n)
	top := math.Inf(-1)
	// Commits share their counts in long stretches: one integral each.
	lastF, lastP := -1.0, -1.0
	var lastScore, lastRate, lastBase float64
	for c := range score {
		fb, pb := s.failedBelow[c]+known, s.below[c]
		if fb != lastF || pb != lastP {
			fg, pg := fails-s.failedBelow[c], passes-pb
			lg, mg := baseMarginal(fg, pg)
			lastF, lastP = fb, pb
			lastScore = flakyRate.logMarginal(fb, pb) + lg
			lastRate, lastBase = flakyRate.mean(fb, pb), mg
		}
		score[c] = s.logPrior[c] + lastScore
		rate[c], base[c] = lastRate, lastBase
		top = math.Max(top, score[c])
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
	return pc, rate, base
}

// Probabilities are each commit's probability of being the first bad
// one.
func (s *Flaky) Probabilities() []float64 {
	pc, _, _ := s.posterior()
	return pc
}

// Rate is the posterior mean of a bad commit's failure rate.
func (s *Flaky) Rate() float64 {
	r, _ := s.Rates()
	return r
}

// Rates are the posterior means of a bad commit's failure rate and of a
// good one's (the test's base flake rate).
func (s *Flaky) Rates() (bad, good float64) {
	pc, rate, base := s.posterior()
	for c, p := range pc {
		bad += p * rate[c]
		good += p * base[c]
	}
	return bad, good
}

// Leading lists the most probable culprits until they hold the
// confidence's mass (at most k).
func (s *Flaky) Leading(k int) []Candidate {
	pc, _, _ := s.posterior()
	return leading(pc, s.opt.Confidence, k)
}

// Next says which commit to run next, or how the search ends.
func (s *Flaky) Next() Step {
	pc, rate, base := s.posterior()
	conf := s.opt.Confidence
	lead := leading(pc, 0, 1)[0]
	cls, mass := s.leadingClass(pc)
	s.settle(cls, mass)
	if mass >= conf {
		if len(cls) > 1 {
			return Step{Kind: Inconclusive, Probability: mass, Candidates: cls,
				Reason: fmt.Sprintf("the first bad commit is one of %d commits at probability %.4g after %d runs; skipped commits among them cannot be told apart", len(cls), mass, s.runs)}
		}
		if c, ok := s.confirmNext(cls[0].Commit, rate, base); ok {
			return Step{Kind: Measure, Commit: c, Confirming: true, Probability: cls[0].Probability}
		}
		return Step{Kind: Found, Commit: cls[0].Commit, Probability: cls[0].Probability, Candidates: cls,
			Reason: fmt.Sprintf("probability %.4g after %d runs, confirmed by fresh runs of it and its parents", cls[0].Probability, s.runs)}
	}
	if budget := s.budget(pc, rate, base); s.runs >= budget {
		return Step{Kind: Inconclusive, Probability: lead.Probability, Candidates: leading(pc, conf, 10),
			Reason: fmt.Sprintf("the budget of %d runs ran out with no commit at probability %g (the most probable: %.3g)", budget, conf, lead.Probability)}
	}
	x, gain := s.choose(pc, rate, base)
	if x < 0 || gain < 1e-9 {
		return Step{Kind: Inconclusive, Probability: lead.Probability, Candidates: leading(pc, conf, 10),
			Reason: "no commit that can be run tells the leading candidates apart (they are skipped, or next to skipped commits)"}
	}
	return Step{Kind: Measure, Commit: x, Probability: lead.Probability}
}

// budget is the runs the search may take: MaxRuns when given; else
// DefaultMaxRuns, or more for a test whose runs tell little (a low
// failure rate on bad commits, a base rate of failing on good ones):
// five times the runs that would learn the culprit's bits at what a run
// now tells about a commit as likely bad as good, up to ten times the
// default.
func (s *Flaky) budget(pc, rate, base []float64) int {
	n := s.d.Len()
	if s.opt.given {
		return s.opt.MaxRuns
	}
	var r, e float64
	for c, p := range pc {
		r += p * rate[c]
		e += p * base[c]
	}
	mi := h2(0.5*r+0.5*e) - 0.5*h2(r) - 0.5*h2(e)
	runs := s.opt.MaxRuns
	if mi > 0 {
		runs = max(runs, int(math.Ceil(5*math.Log2(float64(n+1))/mi)))
	}
	return min(runs, 10*DefaultMaxRuns(n))
}

// choose picks the commit whose next run says the most about the
// culprit, and what it tells (gains).
func (s *Flaky) choose(pc, rate, base []float64) (int, float64) {
	best, bestGain := -1, 0.0
	for x, g := range s.gains(pc, rate, base) {
		if !s.skip[x] && (best < 0 || g > bestGain) {
			best, bestGain = x, g
		}
	}
	return best, bestGain
}

// gains is what a run of each commit tells about the culprit. The
// outcome at x depends on the culprit through whether x is bad (it fails
// at the bad rate) or good (at the base rate), so the mutual information
// is h2(P(fail)) − E[h2(its rate)]: sums over each commit's ancestors
// that DAG.badness makes, and their complements.
func (s *Flaky) gains(pc, rate, base []float64) []float64 {
	n := len(pc)
	failB, spreadB := make([]float64, n), make([]float64, n)
	failG, spreadG := make([]float64, n), make([]float64, n)
	var totG, totSG float64
	lastR, lastHR, lastE, lastHE := -1.0, 0.0, -1.0, 0.0
	for c, p := range pc {
		if rate[c] != lastR {
			lastR, lastHR = rate[c], h2(rate[c])
		}
		if base[c] != lastE {
			lastE, lastHE = base[c], h2(base[c])
		}
		failB[c], spreadB[c] = p*rate[c], p*lastHR
		failG[c], spreadG[c] = p*base[c], p*lastHE
		totG += failG[c]
		totSG += spreadG[c]
	}
	qb, qsb := s.d.badness(failB), s.d.badness(spreadB)
	qg, qsg := s.d.badness(failG), s.d.badness(spreadG)
	g := failB // reused: each x is read before it is written
	for x := range pc {
		fail := qb[x] + totG - qg[x]
		spread := qsb[x] + totSG - qsg[x]
		g[x] = h2(math.Min(math.Max(fail, 0), 1)) - spread
	}
	return g
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
