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
			Name:        "check",
			Usage:       "connect to the job's host and say whether its kernel runs as the job needs",
			Description: helpText(hostCheckHelp),
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
	out := report.HostJSON{Host: c.Host, Facts: c.Facts, OK: len(c.Wrong) == 0 && len(c.Problems) == 0, Wrong: c.Wrong, Problems: c.Problems, Base: c.Base, Checked: c.Checked}
	if asJSON {
		report.WriteJSON(stdout, out)
	} else {
		report.WriteHostCheck(stdout, out)
	}
	if !out.OK {
		return &resultError{code: exitFailure}
	}
	return nil
}
