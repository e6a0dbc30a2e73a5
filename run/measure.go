package run

import (
	"context"
	"fmt"
	"io"
	"kbisect/configs"
	"kbisect/internal/shell"
	"kbisect/internal/usage"
	"kbisect/lab"
	"kbisect/noise"
	"os"
	"sort"
	"strings"
	"time"
)

// MeasureOptions run the noise workload, on a job's lab host or on this
// machine, and decide from its samples (kbisect measure).
type MeasureOptions struct {
	// Job is the job file; without one, Tool, CPUs and Duration say
	// what to run on this machine.
	Job                  string
	Local                bool
	Samples              int
	Tool, CPUs, Duration string
	// Messages gets kbisect's own lines.
	Messages io.Writer
	// Sample hears each sample as it ends.
	Sample func(job *configs.Job, i int, m *noise.Measurement, value float64)
}

// Measure takes the samples and decides, when the job's rule can alone.
func Measure(ctx context.Context, o MeasureOptions) (*configs.Job, *lab.MeasureResult, error) {
	if o.Messages == nil {
		o.Messages = io.Discard
	}
	if !o.Local && o.Job == "" {
		return nil, nil, usage.Errorf("measure: give --job FILE to measure its lab host over SSH, or --local to measure this machine")
	}
	if o.Samples < 0 {
		return nil, nil, usage.Errorf("measure --samples %d: give a positive number", o.Samples)
	}
	job, err := measureJob(o)
	if err != nil {
		return nil, nil, err
	}
	if err := job.CheckEnv(nil); err != nil {
		return nil, nil, usage.Errorf("measure: %v", err)
	}
	if _, err := lab.MetricKind(job); err != nil {
		return nil, nil, usage.Errorf("measure: %v", err)
	}
	var runner shell.Runner = shell.LocalRunner{}
	if !o.Local {
		h, err := lab.DialHost(ctx, job)
		if err != nil {
			return nil, nil, fmt.Errorf("measure: %w", err)
		}
		defer h.Close()
		runner = h
		fmt.Fprintf(o.Messages, "measuring on %s\n", h.Name())
	}
	var sample func(int, *noise.Measurement, float64)
	if o.Sample != nil {
		sample = func(i int, m *noise.Measurement, v float64) { o.Sample(job, i, m, v) }
	}
	res, err := lab.Measure(ctx, job, runner, o.Samples, sample)
	if err != nil {
		return nil, nil, fmt.Errorf("measure: %w", err)
	}
	return job, res, nil
}

// measureJob returns the job to measure: the job file, or one made of
// --tool, --cpus and --duration with kbisect's defaults.
func measureJob(o MeasureOptions) (*configs.Job, error) {
	if o.Job != "" {
		if o.Tool != "" || o.CPUs != "" {
			return nil, usage.Errorf("measure: --tool and --cpus are for runs without --job (the job file says them)")
		}
		return configs.Open(o.Job, o.Messages)
	}
	if o.Tool == "" || o.CPUs == "" {
		return nil, usage.Errorf("measure: give --job FILE, or --tool and --cpus")
	}
	if len(configs.Metrics(o.Tool)) == 0 || o.Tool == configs.ToolCommand {
		return nil, usage.Errorf("measure --tool %s: one of %s (a custom command needs a job file)", o.Tool, strings.Join(configs.Tools[:5], ", "))
	}
	cpus, err := configs.ParseCPUs(o.CPUs, 0)
	if err != nil {
		return nil, usage.Errorf("measure --cpus %s: %v", o.CPUs, err)
	}
	d, err := configs.ParseDuration(o.Duration)
	if err != nil || d.D() < time.Second {
		return nil, usage.Errorf("measure --duration %s: give a duration of a second or more (e.g. 60s)", o.Duration)
	}
	job := &configs.Job{File: "(command line)"}
	localMachine(job)
	job.Workload = configs.Workload{Tool: o.Tool, CPUs: cpus, Duration: d, NoiseThreshold: configs.DefaultNoiseThreshold}
	m := configs.Metrics(o.Tool)[0]
	job.Verdict = configs.Verdict{Metric: m.Name, Aggregate: "max", Direction: m.Direction,
		Threshold:  configs.Threshold{Kind: configs.ThresholdAuto},
		Samples:    configs.Samples{Min: configs.DefaultSamplesMin, Max: configs.DefaultSamplesMax},
		Confidence: configs.DefaultConfidence}
	return job, nil
}

// localMachine fills what the job needs to know of this machine to keep
// the tools' own threads off the isolated CPUs: its CPUs, and the
// isolation it booted with, as the kernel reports them.
func localMachine(job *configs.Job) {
	read := func(name string) string {
		b, err := os.ReadFile("/sys/devices/system/cpu/" + name)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	online, err := configs.ParseCPUs(read("online"), 0)
	if err != nil || len(online) == 0 {
		return
	}
	job.Machine.CPUs = online.Max() + 1
	var params []string
	for name, file := range map[string]string{"isolcpus": "isolated", "nohz_full": "nohz_full"} {
		if list := read(file); list != "" && list != "(null)" {
			params = append(params, name+"="+list)
		}
	}
	sort.Strings(params)
	job.Boot.Params = strings.Join(params, " ")
}
