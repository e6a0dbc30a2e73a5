package main

import (
	"context"
	"io"
	"kbisect/report"
	"kbisect/run"

	"github.com/urfave/cli/v2"
)

func buildCommand() *cli.Command {
	return &cli.Command{
		Name:        "build",
		Usage:       "build the kernel of a revision with the job's config, verified, cached",
		Description: helpText(buildHelp),
		Flags: []cli.Flag{
			verboseFlag(),
			&cli.StringFlag{Name: "job", Required: true, Usage: "job file: its build section"},
			&cli.StringFlag{Name: "rev", Required: true, Usage: "the revision to build"},
			&cli.IntFlag{Name: "slot", Usage: "build slot (0, 1, … build side by side)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object on stdout (a failure's too)"},
			&cli.StringFlag{Name: "log", Usage: "make's output: this file, or - for stderr (default: the cache's logs/)"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			return runBuild(traceTo(c.Context, c.Bool("verbose"), c.App.ErrWriter), c.String("job"), c.String("rev"), c.String("log"), c.Int("slot"), c.Bool("json"), c.App.Writer, c.App.ErrWriter)
		},
	}
}

func runBuild(ctx context.Context, jobFile, rev, logTo string, slot int, asJSON bool, stdout, stderr io.Writer) error {
	a, err := run.Build(ctx, jobFile, rev, logTo, slot, stderr)
	switch {
	case err != nil && asJSON:
		report.WriteJSON(stdout, run.BuildFailure(err))
		return &reportedError{err: err}
	case err != nil:
		return err
	case asJSON:
		report.WriteJSON(stdout, a)
	default:
		report.WriteArtifact(stdout, a)
	}
	return nil
}
