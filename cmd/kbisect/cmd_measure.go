package main

import (
	"context"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"kbisect/configs"
	"kbisect/noise"
	"kbisect/report"
	"kbisect/run"
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
		Name:        "measure",
		Usage:       "run the noise workload on the lab host (or this machine) and decide from its samples",
		Description: helpText(measureHelp),
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

func runMeasure(ctx context.Context, o measureOptions, stdout, stderr io.Writer) error {
	job, res, err := run.Measure(ctx, run.MeasureOptions{Job: o.Job, Local: o.Local, Samples: o.Samples, Tool: o.Tool, CPUs: o.CPUs,
		Duration: o.Duration, Messages: stderr,
		Sample: func(job *configs.Job, i int, m *noise.Measurement, v float64) {
			report.WriteSampleValue(stderr, job, i, v)
			if !o.JSON {
				report.WriteSample(stdout, job, i, m)
			}
		}})
	if err != nil {
		return err
	}
	if o.JSON {
		report.WriteJSON(stdout, res)
		return nil
	}
	report.WriteMeasureText(stdout, job, res)
	return nil
}
