package lab

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"kbisect/configs"
	"kbisect/internal/shell"
	"kbisect/noise"
)

// Workload turns a job's workload section into what noise runs. env looks
// up the ${NAME} variables of its commands (os.LookupEnv when nil); their
// values go to the commands' environment only.
func Workload(job *configs.Job, env func(string) (string, bool)) (noise.Workload, error) {
	w := job.Workload
	out := noise.Workload{
		Tool:           w.Tool,
		CPUs:           w.CPUs,
		Duration:       w.Duration.D(),
		Period:         w.Period.D(),
		Runtime:        w.Runtime.D(),
		NoiseThreshold: w.NoiseThreshold.D(),
		Priority:       w.Priority,
		Args:           w.Args,
		Command:        string(w.Command),
		Load:           string(w.Load),
		LoadCPUs:       w.LoadCPUs,
	}
	// The tools' own threads go to the housekeeping CPUs: neither
	// measured nor isolated by the boot parameters.
	if job.Machine.CPUs > 0 {
		out.Housekeeping = allCPUs(job.Machine.CPUs).Minus(w.CPUs)
		if bp, err := configs.ParseBootParams(job.Boot.Params, job.Machine.CPUs); err == nil {
			out.Housekeeping = configs.CPUs(out.Housekeeping).Minus(bp.Isolated()).Minus(bp.Tickless())
		}
	}
	if w.Tool == configs.ToolCommand {
		unit := map[string]time.Duration{"ns": time.Nanosecond, "us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[w.Unit]
		out.CommandMetric = noise.CommandMetric{JSONPath: w.JSONPath, Unit: unit}
		if w.Pattern != "" {
			re, err := regexp.Compile(w.Pattern)
			if err != nil {
				return out, fmt.Errorf("workload.pattern: %v", err) // validated by configs already
			}
			out.CommandMetric.Pattern = re
		}
	}
	for _, c := range []configs.Command{w.Command, w.Load} {
		vars, err := c.Env(env)
		if err != nil {
			return out, fmt.Errorf("%s: %v", job.File, err)
		}
		out.Env = append(out.Env, vars...)
	}
	return out, nil
}

func allCPUs(n int) configs.CPUs {
	out := make(configs.CPUs, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// MetricKind is the kind of the job's metric: a time for a command whose
// numbers have a unit.
func MetricKind(job *configs.Job) (string, error) {
	if job.Workload.Tool == configs.ToolCommand && job.Workload.Unit != "" {
		return noise.KindTime, nil // the command's numbers are in ns
	}
	info, err := noise.Metric(job.Workload.Tool, job.Verdict.Metric)
	return info.Kind, err
}

// Rule turns a job's verdict section into a noise rule. good and bad are
// the endpoints' sample values from calibration (nil before it): a ratio
// needs good, auto needs both.
func Rule(job *configs.Job, good, bad []float64) (noise.Rule, error) {
	v := job.Verdict
	kind, err := MetricKind(job)
	if err != nil {
		return noise.Rule{}, err
	}
	r := noise.Rule{
		MetricKind:  kind,
		HigherIsBad: v.Direction != configs.LowerIsBad,
		MinSamples:  v.Samples.Min,
		MaxSamples:  v.Samples.Max,
		Confidence:  v.Confidence,
		Good:        good,
		Bad:         bad,
	}
	switch t := v.Threshold; t.Kind {
	case configs.ThresholdAuto:
		r.Kind = noise.Auto
	case configs.ThresholdRatio:
		r.Kind, r.Threshold = noise.Ratio, t.Value
	case configs.ThresholdTime:
		r.Kind, r.Threshold = noise.Absolute, float64(t.Time)
	default:
		r.Kind, r.Threshold = noise.Absolute, t.Value
	}
	return r, nil
}

// SampleValue is one sample's value for the verdict: the job's metric,
// aggregated over CPUs as the job says (max: the worst CPU).
func SampleValue(job *configs.Job, m *noise.Measurement) (float64, error) {
	info, err := noise.Metric(m.Tool, job.Verdict.Metric)
	if err != nil {
		return 0, err
	}
	vals, err := m.MetricValues(info.Name)
	if err != nil {
		return 0, err
	}
	return noise.AggregateWorst(vals, job.Verdict.Aggregate, job.Verdict.Direction != configs.LowerIsBad)
}

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
