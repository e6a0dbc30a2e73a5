package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"kbisect/bisect"
	"kbisect/noise"
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
	if err := p.init(); err != nil {
		return nil, err
	}
	if c, err := ReadCalibration(p.StateDir); err != nil || c != nil {
		if c != nil {
			p.SetRule(c.Rule)
		}
		return c, err
	}
	base, err := Rule(p.Job, nil, nil)
	if err != nil {
		return nil, err
	}
	fixed := 0
	if base.Kind != noise.Absolute {
		fixed = max(base.MaxSamples, base.MinSamples, 3)
	}
	p.SetRule(base)
	c := &Calibration{}
	for _, end := range []struct {
		name, commit string
		ev           **Evidence
	}{{"bad", bad, &c.Bad}, {"good", good, &c.Good}} {
		ev, err := p.test(ctx, end.commit, fixed, "")
		if err != nil {
			return nil, fmt.Errorf("calibration, the %s endpoint %s: %w", end.name, short(end.commit), err)
		}
		if ev.Values == nil {
			return nil, fmt.Errorf("calibration: the %s endpoint %s cannot be measured: %s", end.name, short(end.commit), ev.Reason)
		}
		*end.ev = ev
	}
	rule := base
	rule.Good, rule.Bad = c.Good.Values, c.Bad.Values
	c.Rule = rule
	dBad, err := rule.Decide(c.Bad.Values)
	if err != nil {
		return nil, err
	}
	dGood, err := rule.Decide(c.Good.Values)
	if err != nil {
		return nil, err
	}
	for _, e := range []struct {
		ev *Evidence
		d  noise.Decision
	}{{c.Bad, dBad}, {c.Good, dGood}} {
		d := e.d
		e.ev.Decision = &d
		e.ev.Verdict, e.ev.Reason = string(d.Verdict), d.Reason
		if d.Verdict == noise.Unsure {
			e.ev.Verdict = verdictSkip
		}
	}
	switch {
	case dBad.Verdict != noise.Bad:
		c.Reason = fmt.Sprintf("the bad endpoint %s is not bad: %s", short(bad), dBad.Reason)
	case dGood.Verdict != noise.Good:
		c.Reason = fmt.Sprintf("the good endpoint %s is not good: %s", short(good), dGood.Reason)
	default:
		c.Reproduced = true
		c.Reason = fmt.Sprintf("bad %s: %s; good %s: %s", short(bad), dBad.Reason, short(good), dGood.Reason)
	}
	for _, ev := range []*Evidence{c.Bad, c.Good} {
		if err := p.save(ev); err != nil {
			return nil, err
		}
		if ev.Signature != "" && ev.Verdict != verdictSkip {
			p.bySig[ev.Signature] = ev
		}
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := bisect.WriteFileAtomic(p.calibrationPath(), append(b, '\n')); err != nil {
		return nil, err
	}
	p.SetRule(rule)
	return c, nil
}
