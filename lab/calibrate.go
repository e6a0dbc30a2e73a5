package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"kbisect/internal/atomicfile"
	"kbisect/internal/commitid"
	"kbisect/noise"
	"kbisect/verdict"
)

// Calibration is what the endpoints measured before the bisection: the
// rule every commit is then judged by, and whether the endpoints behave
// as good and bad under it. Nobody bisects noise: a bad endpoint that is
// not bad, or a good one that is not good, stops the run.
type Calibration struct {
	Good       *Evidence  `json:"good"`
	Bad        *Evidence  `json:"bad"`
	Rule       noise.Rule `json:"rule"`
	Reproduced bool       `json:"reproduced"`
	Reason     string     `json:"reason"`
	// GoodIsBad says why it is not reproduced: the good endpoint measured
	// bad too (an absolute threshold), or the endpoints measured alike (a
	// ratio or auto one, which cannot tell which of them is wrong). An
	// older good revision may then be found (FindGood).
	GoodIsBad bool `json:"good_is_bad,omitempty"`
	// Search is the walk back that found the good endpoint the
	// bisection started from, when the one given measured bad.
	Search *Search `json:"search,omitempty"`
}

// judge decides the calibration's endpoints under the base rule: sets
// the rule (a relative threshold takes their samples), each endpoint's
// verdict, and whether the regression is reproduced. goodName and
// badName are how the reason names them.
func (c *Calibration) judge(base noise.Rule, goodName, badName string) error {
	rule := base
	rule.Good, rule.Bad = c.Good.Values, c.Bad.Values
	c.Rule = rule
	var dGood, dBad noise.Decision
	var err error
	if base.Kind != noise.Absolute && !rule.Worse(c.Bad.Values, c.Good.Values) {
		// A relative rule has nothing to go by when the bad endpoint is
		// no worse than the good one.
		alike := fmt.Sprintf("median %s, no worse than the good endpoint's %s", noise.FormatValue(rule.MetricKind, noise.Median(c.Bad.Values)), noise.FormatValue(rule.MetricKind, noise.Median(c.Good.Values)))
		dBad = noise.Decision{Verdict: verdict.Unsure, N: len(c.Bad.Values), Median: noise.Median(c.Bad.Values), Reason: alike}
		dGood = noise.Decision{Verdict: verdict.Unsure, N: len(c.Good.Values), Median: noise.Median(c.Good.Values), Reason: fmt.Sprintf("median %s", noise.FormatValue(rule.MetricKind, noise.Median(c.Good.Values)))}
	} else {
		if dBad, err = rule.Decide(c.Bad.Values); err != nil {
			return err
		}
		if dGood, err = rule.Decide(c.Good.Values); err != nil {
			return err
		}
	}
	for _, e := range []struct {
		ev *Evidence
		d  noise.Decision
	}{{c.Bad, dBad}, {c.Good, dGood}} {
		d := e.d
		e.ev.Decision = &d
		e.ev.Verdict, e.ev.Reason = ofRule(d.Verdict), d.Reason
	}
	c.Reproduced, c.GoodIsBad = false, false
	switch {
	case dBad.Verdict != verdict.Bad && base.Kind != noise.Absolute:
		c.GoodIsBad = true
		c.Reason = fmt.Sprintf("the endpoints measure alike: bad %s: %s; %s threshold cannot tell whether the good endpoint %s already has the regression or the workload does not see it",
			commitid.Short(badName), dBad.Reason, thresholdWord(base.Kind), commitid.Short(goodName))
	case dBad.Verdict != verdict.Bad:
		c.Reason = fmt.Sprintf("the bad endpoint %s is not bad: %s; check the threshold against these numbers, that the workload runs on the isolated CPUs (workload.cpus), and that the kernel booted with the machine's isolation parameters (boot.params) — the bad endpoint is never moved", commitid.Short(badName), dBad.Reason)
	case dGood.Verdict == verdict.Bad:
		c.GoodIsBad = true
		c.Reason = fmt.Sprintf("the good endpoint %s is bad too: %s; the regression is older than it", commitid.Short(goodName), dGood.Reason)
	case dGood.Verdict != verdict.Good:
		c.Reason = fmt.Sprintf("the good endpoint %s is not good: %s", commitid.Short(goodName), dGood.Reason)
	default:
		c.Reproduced = true
		c.Reason = fmt.Sprintf("bad %s: %s; good %s: %s", commitid.Short(badName), dBad.Reason, commitid.Short(goodName), dGood.Reason)
	}
	return nil
}

func thresholdWord(k noise.ThresholdKind) string {
	if k == noise.Ratio {
		return "a ratio"
	}
	return "an auto"
}

func (p *Pipeline) calibrationPath() string {
	return filepath.Join(p.StateDir, "calibration.json")
}

// Calibrate measures the bad endpoint, then the good one, and derives the
// rule: an absolute threshold decides each endpoint as it decides any
// commit; a ratio or auto threshold takes verdict.samples.max samples of
// each and is set from them. A calibration kept in the state directory
// is reused. An endpoint that does not build or boot is an error: there
// is nothing to bisect against.
func (p *Pipeline) Calibrate(ctx context.Context, good, bad string) (*Calibration, error) {
	return calibrate(ctx, []*Pipeline{p}, good, bad)
}

// calibrate calibrates the pipelines of identical machines: with two or
// more, the endpoints are measured at once, the bad one on the first.
func calibrate(ctx context.Context, pipes []*Pipeline, good, bad string) (*Calibration, error) {
	p := pipes[0]
	for _, q := range pipes {
		if err := q.init(); err != nil {
			return nil, err
		}
	}
	setRule := func(r noise.Rule) {
		for _, q := range pipes {
			q.SetRule(r)
		}
	}
	if c, err := ReadCalibration(p.StateDir); err != nil || c != nil {
		if c != nil {
			setRule(c.Rule)
		}
		return c, err
	}
	base, err := Rule(p.Job, nil, nil)
	if err != nil {
		return nil, err
	}
	fixed := 0
	if base.Kind != noise.Absolute {
		fixed = SampleCount(p.Job)
	}
	setRule(base)
	c := &Calibration{}
	// Each endpoint is kept as it is measured: a run killed while the good
	// one is measured does not measure the bad one again.
	partial := filepath.Join(p.StateDir, "calibration-endpoints.json")
	have, err := readIfThere[[2]*Evidence](partial)
	if err != nil {
		return nil, err
	}
	if have == nil {
		have = &[2]*Evidence{}
	}
	keep := func(i int, ev *Evidence) error {
		have[i] = ev
		return atomicfile.WriteJSON(partial, have)
	}
	evs, err := both(ctx, pipes, [2]string{bad, good}, fixed, "", *have, keep)
	for i, name := range []string{"bad", "good"} {
		if err != nil {
			break
		}
		if evs[i].Values == nil {
			err = fmt.Errorf("calibration: the %s endpoint %s cannot be measured: %s", name, commitid.Short(evs[i].Commit), evs[i].Reason)
		}
	}
	if err != nil {
		return nil, err
	}
	c.Bad, c.Good = evs[0], evs[1]
	if err := c.judge(base, good, bad); err != nil {
		return nil, err
	}
	if err := p.resample(ctx, c, base, good, bad, setRule, func(ev *Evidence) error {
		if ev == c.Good {
			return keep(1, ev)
		}
		return keep(0, ev)
	}); err != nil {
		return nil, fmt.Errorf("calibration: %w", err)
	}
	for _, ev := range []*Evidence{c.Bad, c.Good} {
		if err := p.save(ev); err != nil {
			return nil, err
		}
		if ev.Signature != "" && ev.Verdict != verdict.Skip {
			p.bySig[ev.Signature] = ev
		}
	}
	if err := atomicfile.WriteJSON(p.calibrationPath(), c); err != nil {
		return nil, err
	}
	_ = os.Remove(partial) // the calibration holds them now
	setRule(c.Rule)
	return c, nil
}

// resample gives an endpoint left unsure more samples: one sampled until
// its own samples decided may be unsure once judged with both endpoints'
// spread (a quiet kernel whose noise spikes now and then widens it). It
// is measured again, on a new boot, under the judged rule, up to
// verdict.samples.max, and both are judged again; keep is told of each
// endpoint measured again.
func (p *Pipeline) resample(ctx context.Context, c *Calibration, base noise.Rule, good, bad string, setRule func(noise.Rule), keep func(*Evidence) error) error {
	for base.Kind == noise.Absolute && !c.Reproduced {
		more := false
		for _, ev := range []*Evidence{c.Bad, c.Good} {
			if ev.Decision == nil || !ev.Decision.More || len(ev.Values) >= base.MaxSamples || ev.Build == nil {
				continue
			}
			art, err := p.intact(ctx, ev.Commit, ev.Build.Artifact)
			if err != nil {
				return err
			}
			setRule(c.Rule)
			if err := p.measure(ctx, ev, art, 0); err != nil {
				return fmt.Errorf("%s: %w", commitid.Short(ev.Commit), err)
			}
			if err := keep(ev); err != nil {
				return err
			}
			more = true
		}
		if !more {
			return nil
		}
		if err := c.judge(base, good, bad); err != nil {
			return err
		}
	}
	return nil
}

// both measures two commits with fixed samples: at once on the first two
// pipelines when there are two, else one after the other. A commit with
// evidence in have is not measured again; keep is told of each one
// measured, as it ends (one at a time). The first error says which commit.
func both(ctx context.Context, pipes []*Pipeline, commits [2]string, fixed int, sub string, have [2]*Evidence, keep func(int, *Evidence) error) ([2]*Evidence, error) {
	var evs [2]*Evidence
	var errs [2]error
	var mu sync.Mutex
	run := func(i int, p *Pipeline) {
		if have[i] != nil && have[i].Commit == commits[i] {
			evs[i] = have[i]
			return
		}
		evs[i], errs[i] = p.test(ctx, commits[i], fixed, sub)
		if errs[i] == nil && evs[i].Values != nil {
			mu.Lock()
			errs[i] = keep(i, evs[i])
			mu.Unlock()
		}
		if errs[i] != nil {
			errs[i] = fmt.Errorf("%s: %w", commitid.Short(commits[i]), errs[i])
		}
	}
	if len(pipes) > 1 {
		var wg sync.WaitGroup
		for i := range commits {
			wg.Add(1)
			go func() { defer wg.Done(); run(i, pipes[i]) }()
		}
		wg.Wait()
	} else {
		for i := range commits {
			if run(i, pipes[0]); errs[i] != nil {
				break
			}
		}
	}
	return evs, errors.Join(errs[0], errs[1])
}
