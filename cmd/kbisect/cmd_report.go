package main

import (
	"context"
	"io"

	"github.com/urfave/cli/v2"

	"kbisect/report"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:        "report",
		Usage:       "render a run's or an A/B comparison's result and evidence from its state directory, also while it runs",
		Description: helpText(reportHelp),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "state", Required: true, Usage: "the run's or comparison's state directory"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text, markdown, json, html or junit"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the report to this file (replaced whole) instead of stdout"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			return runReport(c.Context, reportOptions{State: c.String("state"), Format: c.String("format"), Output: c.String("output")}, c.App.Writer)
		},
	}
}

type reportOptions struct {
	State, Format, Output string
}

func runReport(ctx context.Context, o reportOptions, stdout io.Writer) error {
	return report.WriteOutput(o.Output, stdout, func(w io.Writer) error { return report.FromState(ctx, o.State, o.Format, w) })
}
