package simulate

import (
	"context"

	"kbisect/culprit"
	"kbisect/drive"
	"kbisect/noise"
	"kbisect/verdict"
)

// outcome is how one strategy's bisection ended.
type outcome struct {
	kind    string // found, inconclusive, not-reproduced
	culprit int
	// probability is what the strategy said of its answer (kbisect only).
	probability float64
}

// strategy bisects a simulated lab.
type strategy struct {
	name  string
	about string
	run   func(cfg *Config, l *lab) outcome
}

// strategies are what `kbisect simulate` compares, kbisect's engine first.
var strategies = []strategy{
	{"kbisect", "the posterior over the commits, boots as evidence, confirmed by fresh boots", runEngine},
	{"rule", "the sequential rule per commit (3–10 samples on one boot), git's bisection, 5 confirmation rounds", runRule},
	{"git-bisect", "one sample per commit against the threshold", func(cfg *Config, l *lab) outcome { return runFixed(cfg, l, 1) }},
	{"median-10", "the median of 10 samples of one boot per commit against the threshold", func(cfg *Config, l *lab) outcome { return runFixed(cfg, l, 10) }},
}

// runEngine is kbisect: the loop run --job runs (package drive), on a
// machine that is the simulated lab.
func runEngine(cfg *Config, l *lab) outcome {
	var res drive.Result
	var err error
	if cfg.Machines > 1 {
		p := newPool(l, cfg.Machines, cfg.MachineSpread, l.machines)
		res, err = drive.RunPool(context.Background(), p, engineOptions(cfg, l))
		l.spent.wall = p.wall()
	} else {
		res, err = drive.Run(context.Background(), l, engineOptions(cfg, l))
	}
	switch {
	case err != nil || res.NotReproduced != "" || res.End.Kind == culprit.NotReproduced:
		return outcome{kind: "not-reproduced"}
	case res.End.Kind == culprit.Found:
		return outcome{kind: "found", culprit: res.End.Commit, probability: res.End.Probability}
	}
	return outcome{kind: "inconclusive", probability: res.End.Probability}
}

// engineOptions are the loop's options for a simulation of cfg on the
// lab: the search's, and what a run builds ahead while it measures
// (Config.predict), which the speed benchmark prices.
func engineOptions(cfg *Config, l *lab) drive.Options {
	d := culprit.Chain(l.n)
	if l.hist != nil && l.hist.dag != nil {
		d = l.hist.dag
	}
	opt := drive.Options{
		Range: func() (*culprit.DAG, error) { return d, nil },
		Search: culprit.Options{Confidence: cfg.Confidence, MaxBoots: cfg.MaxBoots, MinSamples: cfg.MinSamples, MaxSamples: cfg.MaxSamples,
			FromOne: cfg.minDefault, Revert: true, Costs: culprit.Costs(cfg.Costs)},
		Least: cfg.MinSamples, CalibrationSamples: min(max(cfg.MinSamples, 5), cfg.MaxSamples)}
	if !cfg.halfway {
		// As run/search_calibrate.go: a job's absolute threshold may
		// end calibration as not reproduced.
		opt.Hooks.Stop = func(goods, bads [][]float64) (string, bool) {
			switch badIsGood, goodIsBad := culprit.AgainstThreshold(goods, bads, cfg.Threshold); {
			case badIsGood:
				return "the bad endpoint is not bad: no boot beyond the threshold", false
			case goodIsBad:
				return "the good endpoint is bad too: every boot beyond the threshold", true
			}
			return "", false
		}
	}
	if cfg.predict == 0 {
		return opt
	}
	// As run/search.go: a kernel built ahead costs no build when the
	// search weighs its next boot.
	var first []kernel
	opt.Hooks.Calibrating = func(round int, provisional func() *culprit.Search) {
		switch {
		case round == 0:
			// The good endpoint builds while the bad one is measured.
			l.ahead = []kernel{{commit: -1}}
		case round == 1:
			// The search's first commit, as the endpoints' first boots
			// have it, builds while the second round is measured.
			s := provisional()
			if s == nil {
				return
			}
			if step := s.Next(); step.Kind == culprit.Measure && !step.Reverted {
				first = []kernel{{commit: step.Commit}}
				l.ahead = first
			}
		}
	}
	opt.Hooks.Started = func(s *culprit.Search) {
		for _, k := range first {
			s.Built(k.commit)
		}
	}
	opt.Hooks.Before = func(s *culprit.Search, step culprit.Step) {
		// What comes next if this boot measures good or bad (and after
		// that, with slots to spare), a revert included.
		l.ahead = nil
		for _, a := range s.Ahead(step, cfg.predict) {
			l.ahead = append(l.ahead, kernel{a.Commit, a.Reverted})
			if !a.Reverted {
				s.Built(a.Commit)
			}
		}
	}
	return opt
}

// rule is the job's sequential rule as kbisect applied it before the
// engine: an absolute threshold, 3–10 samples, the endpoints' samples
// for the spread.
func (cfg *Config) rule(good, bad []float64) noise.Rule {
	return noise.Rule{Kind: noise.Absolute, Threshold: cfg.Threshold, MetricKind: cfg.Kind, HigherIsBad: true,
		MinSamples: cfg.MinSamples, MaxSamples: cfg.MaxSamples, Confidence: 0.95, Good: good, Bad: bad}
}

// sequential samples one boot of c until the rule decides.
func sequential(l *lab, r noise.Rule, c int, reverted bool) ([]float64, verdict.Verdict) {
	m := l.boot(c, reverted)
	var xs []float64
	for {
		xs = append(xs, m.sample())
		d, err := r.Decide(xs)
		if err != nil {
			return xs, verdict.Skip
		}
		if !d.More {
			if d.Verdict == verdict.Unsure {
				return xs, verdict.Skip
			}
			return xs, d.Verdict
		}
	}
}

// runRule is the rule kbisect had: calibrate each endpoint with the
// rule, bisect as git does with one boot per commit (unsure is a skip),
// then confirm with 5 rounds of the culprit against its parent and of
// the bad endpoint against the revert — whose outcome did not change the
// answer.
func runRule(cfg *Config, l *lab) outcome {
	base := cfg.rule(nil, nil)
	bad, vb := sequential(l, base, l.n-1, false)
	l.mark(phaseCalibration)
	good, vg := sequential(l, base, -1, false)
	l.mark(phaseCalibration)
	r := cfg.rule(good, bad)
	if vb != verdict.Bad || vg != verdict.Good {
		return outcome{kind: "not-reproduced"}
	}
	lo, hi := -1, l.n-1
	skipped := map[int]bool{}
	for {
		c, ok := midpoint(lo, hi, skipped)
		if !ok {
			break
		}
		_, v := sequential(l, r, c, false)
		switch v {
		case verdict.Good:
			lo = c
		case verdict.Bad:
			hi = c
		default:
			skipped[c] = true
		}
	}
	if hi-lo > 1 {
		return outcome{kind: "inconclusive"}
	}
	for round := 0; round < 5; round++ {
		if hi > 0 {
			l.boot(hi-1, false).samples(cfg.MinSamples)
			l.mark(phaseConfirm)
		}
		for _, k := range []struct {
			c        int
			reverted bool
		}{{hi, false}, {l.n - 1, false}, {hi, true}} {
			l.boot(k.c, k.reverted).samples(cfg.MinSamples)
			l.mark(phaseConfirm)
		}
	}
	return outcome{kind: "found", culprit: hi}
}

// midpoint is the commit git tests next between the last good lo and the
// first bad hi: the middle one, or the untested one nearest it.
func midpoint(lo, hi int, skipped map[int]bool) (int, bool) {
	mid := lo + (hi-lo)/2
	for d := 0; d < hi-lo; d++ {
		for _, c := range []int{mid - d, mid + d} {
			if c > lo && c < hi && !skipped[c] {
				return c, true
			}
		}
	}
	return 0, false
}

// runFixed is a plain bisection: every commit gets one boot of n
// samples, bad when their median is beyond the threshold; no
// calibration, no confirmation.
func runFixed(cfg *Config, l *lab, n int) outcome {
	lo, hi := -1, l.n-1
	for hi-lo > 1 {
		c := lo + (hi-lo)/2
		if noise.Median(l.boot(c, false).samples(n)) > cfg.Threshold {
			hi = c
		} else {
			lo = c
		}
	}
	return outcome{kind: "found", culprit: hi}
}
