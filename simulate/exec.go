package simulate

import (
	"kbisect/culprit"
)

// execStrategies are what kbisect simulate --exec compares: run --exec
// --confidence, and git bisect run.
var execStrategies = []strategy{
	{"kbisect", "run --exec --confidence: the posterior over the commits, a run of the test each observation", runFlaky},
	{"git-bisect", "git bisect run: one run of the test a step, a failure bad", runGitExec},
}

// test runs the test once on commit c (the good endpoint is −1): it
// fails with the share of its side. A commit's first run builds it.
func (l *lab) test(cfg *Config, c int) bool {
	l.boot(c, false)
	rate := cfg.FailGood
	if l.isBad(c) {
		rate = cfg.FailBad
	}
	l.trace[len(l.trace)-1].samples++
	l.spent.samples++
	l.spent.seconds += l.costs.Sample
	return l.rng.Float64() < rate
}

// runFlaky is run --exec --confidence: culprit.Flaky asks for runs until
// one commit reaches the confidence or the budget runs out.
func runFlaky(cfg *Config, l *lab) outcome {
	s, err := culprit.NewFlaky(culprit.Chain(l.n), culprit.FlakyOptions{Confidence: cfg.Confidence, MaxRuns: cfg.MaxRuns})
	if err != nil {
		return outcome{kind: "not-reproduced"}
	}
	for {
		step := s.Next()
		switch step.Kind {
		case culprit.Found:
			return outcome{kind: "found", culprit: step.Commit, probability: step.Probability}
		case culprit.Inconclusive:
			return outcome{kind: "inconclusive", probability: step.Probability}
		case culprit.NotReproduced:
			return outcome{kind: "not-reproduced"}
		}
		s.Observe(step.Commit, l.test(cfg, step.Commit))
	}
}

// runGitExec is git bisect run: one run a step, a failure bad.
func runGitExec(cfg *Config, l *lab) outcome {
	lo, hi := -1, l.n-1
	for hi-lo > 1 {
		c := lo + (hi-lo)/2
		if l.test(cfg, c) {
			hi = c
		} else {
			lo = c
		}
	}
	return outcome{kind: "found", culprit: hi}
}
