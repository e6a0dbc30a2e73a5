package culprit

import (
	"math"
)

// The priors of a test's two failure rates. A bad commit's rate r
// follows Beta(1, 2) (density 2(1−r): a low rate likelier than a high
// one, none ruled out). A good commit's ε is, at even odds, about 0 (a
// test that does not fail on good commits: Beta(1, 1000), mean 0.001)
// or a base flake rate (Beta(1, 40), mean about 0.024, a few percent
// likely and more possible): a test that also fails on good commits now
// and then is believed after a few such failures, and one that never
// does is soon believed not to.
var (
	flakyRate = betaPrior{1, 2}
	flakyBase = []weighedBeta{{0.5, betaPrior{1, 1000}}, {0.5, betaPrior{1, 40}}}
)

type betaPrior struct{ a, b float64 }

type weighedBeta struct {
	w float64
	betaPrior
}

// logMarginal is log ∫ p^k (1−p)^m Beta(p; a, b) dp.
func (b betaPrior) logMarginal(k, m float64) float64 {
	return lbeta(b.a+k, b.b+m) - lbeta(b.a, b.b)
}

// mean is the posterior mean after k successes in k+m.
func (b betaPrior) mean(k, m float64) float64 { return (b.a + k) / (b.a + b.b + k + m) }

// baseMarginal is the base rate's marginal, and its posterior mean.
func baseMarginal(k, m float64) (float64, float64) {
	logs := make([]float64, len(flakyBase))
	for i, c := range flakyBase {
		logs[i] = math.Log(c.w) + c.logMarginal(k, m)
	}
	total := logSum(logs)
	mean := 0.0
	for i, c := range flakyBase {
		mean += math.Exp(logs[i]-total) * c.mean(k, m)
	}
	return total, mean
}

// settle forgets the confirmation of a candidate that does not lead at
// the confidence now: its fresh runs start again should it lead again.
func (s *Flaky) settle(cls []Candidate, mass float64) {
	for c := range s.confirmFrom {
		if len(cls) != 1 || cls[0].Commit != c || mass < s.opt.Confidence {
			delete(s.confirmFrom, c)
		}
	}
}

// confirmNext is the next commit the confirmation of c runs: each of its
// parents gets fresh runs, as many as would show a bad commit failing at
// least once but for a chance of flakyConfirm, at the rate bad commits
// fail against the rate good ones do (at least 3, at most 40),
// alternating, while c keeps leading: a candidate named after the
// culprit passed by luck is what they catch. When good commits may fail
// too (a base rate of 0.002 or more), c gets as many: a candidate that
// only flaked on a good commit passes them.
func (s *Flaky) confirmNext(c int, rate, base []float64) (int, bool) {
	targets := []int{}
	for _, p := range s.d.parents[c] {
		if !s.skip[p] {
			targets = append(targets, int(p))
		}
	}
	if base[c] >= 2e-3 {
		targets = append(targets, c)
	}
	from := s.confirmFrom[c]
	if from == nil {
		from = map[int]int{}
		for _, t := range targets {
			from[t] = s.passes[t] + s.fails[t]
		}
		s.confirmFrom[c] = from
	}
	// A pass of a bad commit is (1−r)/(1−ε) as likely as a good one's.
	need := int(math.Ceil(math.Log(flakyConfirm) / math.Log((1-math.Min(rate[c], 0.99))/(1-base[c]))))
	need = min(max(need, 3), 40)
	best, fewest := -1, math.MaxInt
	for _, t := range targets {
		if fresh := s.passes[t] + s.fails[t] - from[t]; fresh < need && fresh < fewest {
			best, fewest = t, fresh
		}
	}
	return best, best >= 0
}

func lbeta(a, b float64) float64 { return lgamma(a) + lgamma(b) - lgamma(a+b) }

// flakyConfirm is the chance a bad parent passes all of a confirmation's
// fresh runs: their number is as many as make it this small. 0.1 left
// 0.3 % of answers wrong for a test that never fails on good commits
// and 2.8 % where good commits fail 2 % of their runs (1,000 seeded
// bisections of 2,000 commits each); 0.01 left 0.1 % and 0.15 %.
const flakyConfirm = 0.01
