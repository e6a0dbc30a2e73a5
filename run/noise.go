package run

import (
	"math"

	"kbisect/culprit"
	"kbisect/internal/usage"
	"kbisect/lab"
	"kbisect/noise"
)

// LearnedNoise is a machine's noise as a run's calibration measured it:
// the levels of a good and a bad kernel (in the metric's unit, or as
// badness when lower is worse), the spread within a boot and from boot to
// boot, and the boots it rests on.
type LearnedNoise struct {
	Good, Bad          float64
	Spread, BootSpread float64
	// Time says the levels are times in ns (a higher-is-bad time metric).
	Time                bool
	GoodBoots, BadBoots int
}

// LearnNoise learns the noise from a state directory's calibration: the
// endpoints' boots (a posterior search's 3-8 boots each, or the rule's),
// as kbisect simulate plans with them.
func LearnNoise(dir string) (*LearnedNoise, error) {
	cal, err := lab.ReadCalibration(dir)
	if err != nil {
		return nil, usage.Errorf("--from-state %s: %v", dir, err)
	}
	if cal == nil || cal.Good == nil || cal.Bad == nil {
		return nil, usage.Errorf("--from-state %s: no calibration there yet (the run measures its endpoints first)", dir)
	}
	floor := 1e-3
	if cal.Rule.MetricKind == noise.KindTime {
		floor = 1
	}
	boots := func(ev *lab.Evidence) [][]float64 {
		var out [][]float64
		at := 0
		for _, b := range ev.Boots {
			if b.Samples <= 0 || at+b.Samples > len(ev.Values) {
				continue
			}
			out = append(out, ev.Values[at:at+b.Samples])
			at += b.Samples
		}
		if len(out) == 0 && len(ev.Values) > 0 { // one boot, its samples not counted
			out = append(out, ev.Values)
		}
		for i, boot := range out {
			bad := make([]float64, len(boot))
			for k, x := range boot {
				bad[k] = cal.Rule.Badness(x, floor)
			}
			out[i] = bad
		}
		return out
	}
	good, bad := boots(cal.Good), boots(cal.Bad)
	m, err := culprit.Fit(good, bad, culprit.FitOptions{})
	if err == nil {
		err = m.Validate()
	}
	if err != nil {
		return nil, usage.Errorf("--from-state %s: the endpoints' boots give no model: %v", dir, err)
	}
	return &LearnedNoise{Good: math.Exp(m.Good), Bad: math.Exp(m.Bad), Spread: m.Spread, BootSpread: m.BootSpread,
		Time: cal.Rule.MetricKind == noise.KindTime && cal.Rule.HigherIsBad, GoodBoots: len(good), BadBoots: len(bad)}, nil
}
