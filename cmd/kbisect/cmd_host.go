package main

import (
	"context"
	"io"
	"kbisect/report"
	"kbisect/run"

	"github.com/urfave/cli/v2"
)

func hostCommand() *cli.Command {
	return &cli.Command{
		Name:  "host",
		Usage: "the lab machine of a job",
		Subcommands: []*cli.Command{{
			Name:  "check",
			Usage: "connect to the job's host and say whether its kernel runs as the job needs",
			Description: `check connects to the job's host over SSH (verifying its host key against
known_hosts), prints the running kernel's release, boot id, command line,
isolated and nohz_full CPUs and whether PREEMPT_RT is active, and checks
that every boot parameter of the job is in effect. It exits 0 only when
all is well: run it before leaving a bisection alone for the night.

EXAMPLES
   kbisect host check --job configs/system-0.yaml`,
			Flags: []cli.Flag{
				verboseFlag(),
				&cli.StringFlag{Name: "job", Required: true, Usage: "job file of the lab machine"},
				&cli.BoolFlag{Name: "json", Usage: "print one JSON object on stdout"},
			},
			OnUsageError: onUsageError,
			Action: func(c *cli.Context) error {
				return runHostCheck(traceTo(c.Context, c.Bool("verbose"), c.App.ErrWriter), c.String("job"), c.Bool("json"), c.App.Writer, c.App.ErrWriter)
			},
		}},
	}
}

func runHostCheck(ctx context.Context, jobFile string, asJSON bool, stdout, stderr io.Writer) error {
	c, err := run.CheckHost(ctx, jobFile, stderr)
	if err != nil {
		return err
	}
	if asJSON {
		report.WriteJSON(stdout, report.HostJSON{Host: c.Host, Facts: c.Facts, OK: len(c.Wrong) == 0, Wrong: c.Wrong})
	} else {
		report.WriteHostCheck(stdout, c.Host, c.Facts, c.Wrong)
	}
	if len(c.Wrong) > 0 {
		return &resultError{code: exitFailure}
	}
	return nil
}
