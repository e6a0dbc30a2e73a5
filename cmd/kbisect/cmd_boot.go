package main

import (
	"context"
	"io"
	"kbisect/report"
	"kbisect/run"

	"github.com/urfave/cli/v2"
)

func bootCommand() *cli.Command {
	return &cli.Command{
		Name:        "boot",
		Usage:       "install a built kernel on the job's host, boot it, and prove it runs as the job needs",
		Description: helpText(bootHelp),
		Flags: []cli.Flag{
			verboseFlag(),
			&cli.StringFlag{Name: "job", Required: true, Usage: "job file of the lab machine"},
			&cli.StringFlag{Name: "artifact", Required: true, Usage: "directory of the built kernel"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			return runBoot(traceTo(c.Context, c.Bool("verbose"), c.App.ErrWriter), c.String("job"), c.String("artifact"), c.App.Writer, c.App.ErrWriter)
		},
	}
}

func runBoot(ctx context.Context, jobFile, artifact string, stdout, stderr io.Writer) error {
	facts, err := run.Boot(ctx, jobFile, artifact, stderr)
	if err != nil {
		return err
	}
	report.WriteBooted(stdout, facts)
	return nil
}
