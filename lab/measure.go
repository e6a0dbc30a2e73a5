package lab

import (
	"context"
	"errors"
	"fmt"

	"kbisect/configs"
	"kbisect/internal/shell"
	"kbisect/noise"
)

// measureOnce takes one sample, and takes it again once when it ran but is
// no evidence (a tainted tracer, a stop, a load that died): a second
// failure is the machine's problem to report.
func measureOnce(ctx context.Context, w noise.Workload, r shell.Runner) (*noise.Measurement, error) {
	var err error
	for try := 0; try < 2; try++ {
		var m *noise.Measurement
		m, _, err = w.Measure(ctx, r)
		if err == nil {
			err = m.Usable()
		}
		var ue *noise.UnusableError
		var le *noise.LoadError
		if err == nil {
			return m, nil
		}
		if !errors.As(err, &ue) && !errors.As(err, &le) {
			return nil, err
		}
	}
	return nil, err
}

// MeasureResult is what Measure did: every sample, its value, and the
// decision of the rule on them when the rule can decide alone (an absolute
// threshold; ratio and auto need the endpoints).
type MeasureResult struct {
	Samples  []*noise.Measurement `json:"samples"`
	Values   []float64            `json:"values"`
	Decision *noise.Decision      `json:"decision,omitempty"`
	Metric   string               `json:"metric"`
	Kind     string               `json:"kind"`
}

// Measure runs the job's workload through r: at least min samples, and
// while the rule is unsure up to max (exactly n samples when n > 0).
// progress, when set, hears about each sample as it ends.
func Measure(ctx context.Context, job *configs.Job, r shell.Runner, n int, progress func(i int, m *noise.Measurement, value float64)) (*MeasureResult, error) {
	w, err := Workload(job, nil)
	if err != nil {
		return nil, err
	}
	rule, err := Rule(job, nil, nil)
	if err != nil {
		return nil, err
	}
	canDecide := rule.Kind == noise.Absolute
	if n > 0 {
		rule.MinSamples, rule.MaxSamples = n, n
	}
	res := &MeasureResult{Metric: job.Verdict.Metric, Kind: rule.MetricKind}
	for i := 0; i < rule.MaxSamples; i++ {
		m, err := measureOnce(ctx, w, r)
		if err != nil {
			return res, fmt.Errorf("sample %d: %w", i+1, err)
		}
		v, err := SampleValue(job, m)
		if err != nil {
			return res, fmt.Errorf("sample %d: %w", i+1, err)
		}
		res.Samples, res.Values = append(res.Samples, m), append(res.Values, v)
		if progress != nil {
			progress(i+1, m, v)
		}
		if !canDecide {
			if len(res.Values) >= rule.MinSamples {
				break
			}
			continue
		}
		d, err := rule.Decide(res.Values)
		if err != nil {
			return res, err
		}
		res.Decision = &d
		if !d.More {
			break
		}
	}
	return res, nil
}
