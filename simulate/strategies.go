package simulate

import (
	"kbisect/culprit"
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

// runEngine is kbisect: calibrate from boots of both endpoints, then let
// the search ask for boots until it finds, confirmed, or runs out.
func runEngine(cfg *Config, l *lab) outcome {
	n := max(cfg.MinSamples, 5)
	var goods, bads [][]float64
	var model culprit.Model
	predicted := false
	for {
		m, more, err := culprit.Calibrate(goods, bads, cfg.MinSamples, culprit.FitOptions{})
		if !more && err != nil {
			return outcome{kind: "not-reproduced"}
		}
		if !more {
			model = m
			break
		}
		endpoint := l.boot(l.n-1, false)
		switch {
		case cfg.predict == 0:
		case len(bads) == 0:
			// The good endpoint builds while the bad one is measured.
			l.trace[len(l.trace)-1].ahead = []kernel{{commit: -1}}
		case !predicted:
			// As run/search_calibrate.go: the search's first commit, as
			// the endpoints' first boots have it, builds while the
			// second round of calibration is measured.
			predicted = true
			if s, err := newEngineSearch(cfg, l.n, m, goods, bads); err == nil {
				if first := s.Next(); first.Kind == culprit.Measure {
					l.trace[len(l.trace)-1].ahead = []kernel{{commit: first.Commit}}
				}
			}
		}
		bads = append(bads, endpoint.samples(n))
		l.mark(phaseCalibration)
		goods = append(goods, l.boot(-1, false).samples(n))
		l.mark(phaseCalibration)
	}
	s, err := newEngineSearch(cfg, l.n, model, goods, bads)
	if err != nil {
		return outcome{kind: "not-reproduced"}
	}
	built := func(ahead []kernel) {
		// As run/search.go: a kernel built ahead costs no build when the
		// search weighs its next boot.
		for _, a := range ahead {
			if !a.reverted && a.commit >= 0 {
				s.Built(a.commit)
			}
		}
	}
	for _, b := range l.trace {
		built(b.ahead)
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
		m := l.boot(step.Commit, step.Reverted)
		if step.Confirming {
			l.mark(phaseConfirm)
		}
		if cfg.predict > 0 {
			// As run/search.go: what comes next if this boot measures
			// good or bad (and after that, with slots to spare), a
			// revert of the bad endpoint included.
			for _, a := range s.Ahead(step, cfg.predict) {
				l.trace[len(l.trace)-1].ahead = append(l.trace[len(l.trace)-1].ahead, kernel{a.Commit, a.Reverted})
			}
			built(l.trace[len(l.trace)-1].ahead)
		}
		var xs []float64
		for len(xs) == 0 || s.More(xs) {
			xs = append(xs, m.sample())
		}
		s.Observe(step, xs)
	}
}

// newEngineSearch is the search over a chain of n commits on model, the
// bad endpoint's calibration boots its evidence.
func newEngineSearch(cfg *Config, n int, model culprit.Model, goods, bads [][]float64) (*culprit.Search, error) {
	s, err := culprit.New(culprit.Chain(n), model, culprit.Options{
		Confidence: cfg.Confidence, MaxBoots: cfg.MaxBoots, MinSamples: cfg.MinSamples, MaxSamples: cfg.MaxSamples, FromOne: cfg.minDefault,
		Revert: true, Costs: culprit.Costs(cfg.Costs), GoodBoots: goods})
	if err != nil {
		return nil, err
	}
	for _, b := range bads {
		s.ObserveAt(n-1, b)
	}
	return s, nil
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
