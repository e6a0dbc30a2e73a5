package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"kbisect/configs"
	"kbisect/internal/shell"
	"kbisect/lab"
	"kbisect/noise"
)

// measureOptions are kbisect measure's flags.
type measureOptions struct {
	Job      string
	Local    bool
	Samples  int
	JSON     bool
	Tool     string
	CPUs     string
	Duration string
}

func measureCommand() *cli.Command {
	return &cli.Command{
		Name:  "measure",
		Usage: "run the noise workload on the lab host (or this machine) and decide from its samples",
		Description: `measure runs the job's workload (the osnoise tracer through tracefs,
rtla, oslat, cyclictest or your own command) on the job's lab host over
SSH, or on this machine with --local, on the measured CPUs of the job,
sample after sample, and prints each sample's
per-CPU table. With an absolute threshold in the job it stops as soon as
the verdict is sure (at least verdict.samples.min samples, at most max)
and prints the verdict; with ratio or auto thresholds, which need both
endpoints, it takes verdict.samples.min samples and prints their values.

Tracefs is root's: connect as root, or set host.sudo. With --local and
without a job file, --tool and --cpus say what to run.

EXAMPLES
   kbisect measure --job configs/system-0.yaml
   kbisect measure --local --job configs/system-0.yaml
   kbisect measure --local --tool osnoise --cpus 1-3 --duration 10s --samples 3
   kbisect measure --local --job configs/system-0.yaml --json > samples.json`,
		Flags: []cli.Flag{
			verboseFlag(),
			&cli.StringFlag{Name: "job", Usage: "job file: its workload and verdict sections"},
			&cli.BoolFlag{Name: "local", Usage: "measure this machine instead of the job's host"},
			&cli.IntFlag{Name: "samples", Usage: "take exactly N samples (default: as the job's verdict rule needs)"},
			&cli.StringFlag{Name: "tool", Usage: "without --job: " + strings.Join(configs.Tools[:5], ", ")},
			&cli.StringFlag{Name: "cpus", Usage: "without --job: the CPUs to measure (e.g. 1-16,33-48)"},
			&cli.StringFlag{Name: "duration", Value: "60s", Usage: "without --job: one sample's length"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object on stdout at the end"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("measure: unexpected argument %q", c.Args().First())
			}
			o := measureOptions{Job: c.String("job"), Local: c.Bool("local"), Samples: c.Int("samples"), JSON: c.Bool("json"),
				Tool: c.String("tool"), CPUs: c.String("cpus"), Duration: c.String("duration")}
			return runMeasure(traceTo(c.Context, c.Bool("verbose"), c.App.ErrWriter), o, c.App.Writer, c.App.ErrWriter)
		},
	}
}

// measureJob returns the job to measure: the job file, or one made of
// --tool, --cpus and --duration with kbisect's defaults.
func measureJob(o measureOptions, stderr io.Writer) (*configs.Job, error) {
	if o.Job != "" {
		if o.Tool != "" || o.CPUs != "" {
			return nil, usagef("measure: --tool and --cpus are for runs without --job (the job file says them)")
		}
		return loadJob(o.Job, stderr)
	}
	if o.Tool == "" || o.CPUs == "" {
		return nil, usagef("measure: give --job FILE, or --tool and --cpus")
	}
	if len(configs.Metrics(o.Tool)) == 0 || o.Tool == configs.ToolCommand {
		return nil, usagef("measure --tool %s: one of %s (a custom command needs a job file)", o.Tool, strings.Join(configs.Tools[:5], ", "))
	}
	cpus, err := configs.ParseCPUs(o.CPUs, 0)
	if err != nil {
		return nil, usagef("measure --cpus %s: %v", o.CPUs, err)
	}
	d, err := configs.ParseDuration(o.Duration)
	if err != nil || d.D() < time.Second {
		return nil, usagef("measure --duration %s: give a duration of a second or more (e.g. 60s)", o.Duration)
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

func runMeasure(ctx context.Context, o measureOptions, stdout, stderr io.Writer) error {
	if !o.Local && o.Job == "" {
		return usagef("measure: give --job FILE to measure its lab host over SSH, or --local to measure this machine")
	}
	if o.Samples < 0 {
		return usagef("measure --samples %d: give a positive number", o.Samples)
	}
	job, err := measureJob(o, stderr)
	if err != nil {
		return err
	}
	if err := job.CheckEnv(nil); err != nil {
		return usagef("measure: %v", err)
	}
	kind, err := lab.MetricKind(job)
	if err != nil {
		return usagef("measure: %v", err)
	}
	progress := func(i int, m *noise.Measurement, v float64) {
		fmt.Fprintf(stderr, "sample %d: %s of the %s CPU: %s\n", i, job.Verdict.Metric, worstWord(job.Verdict.Aggregate), noise.FormatValue(kind, v))
		if !o.JSON {
			fmt.Fprintf(stdout, "Sample %d (%s, CPUs %s, %s):\n", i, m.Tool, job.Workload.CPUs, job.Workload.Duration)
			_ = noise.WriteTable(stdout, m)
			fmt.Fprintln(stdout)
		}
	}
	var runner shell.Runner = shell.LocalRunner{}
	if !o.Local {
		h, err := lab.DialHost(ctx, job)
		if err != nil {
			return fmt.Errorf("measure: %w", err)
		}
		defer h.Close()
		runner = h
		fmt.Fprintf(stderr, "measuring on %s\n", h.Name())
	}
	res, err := lab.Measure(ctx, job, runner, o.Samples, progress)
	if err != nil {
		return fmt.Errorf("measure: %w", err)
	}
	if o.JSON {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	values := make([]string, len(res.Values))
	for i, v := range res.Values {
		values[i] = noise.FormatValue(res.Kind, v)
	}
	fmt.Fprintf(stdout, "%s of the %s CPU per sample: %s\n", job.Verdict.Metric, worstWord(job.Verdict.Aggregate), strings.Join(values, ", "))
	if len(res.Values) > 1 {
		lo, hi := res.Values[0], res.Values[0]
		for _, v := range res.Values {
			lo, hi = min(lo, v), max(hi, v)
		}
		med, _ := noise.Aggregate(res.Values, "median")
		fmt.Fprintf(stdout, "median %s, range %s to %s\n", noise.FormatValue(res.Kind, med), noise.FormatValue(res.Kind, lo), noise.FormatValue(res.Kind, hi))
	}
	if d := res.Decision; d != nil {
		fmt.Fprintf(stdout, "verdict: %s (%s)\n", d.Verdict, d.Reason)
	} else {
		fmt.Fprintf(stdout, "no verdict: threshold %s needs both endpoints, measured by kbisect run\n", job.Verdict.Threshold)
	}
	return nil
}

func worstWord(aggregate string) string {
	if aggregate == "max" {
		return "worst"
	}
	return aggregate
}
