package main

import (
	"context"
	"io"

	"github.com/urfave/cli/v2"

	"kbisect/report"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "render a run's or an A/B comparison's result and evidence from its state directory, also while it runs",
		Description: `report reads the state directory of a kbisect run --job or kbisect ab and
prints what they print at their end: for a run, the answer (or "in
progress"), the confirmation of the first bad commit, the tested kernels
oldest first with their numbers, and the last good and first bad kernels
compared with their per-CPU tables; for an A/B comparison, the conclusion,
the summary across CPUs side by side and each kernel's per-CPU table. Both
end with the machine, boot parameters and kernel config used. It takes no
lock: it works while the run goes on.

Formats: text (72 columns, for mail), markdown (issue trackers), json
(everything; fields in docs/report.md), html (one self-contained file
with plots: the bisection at a glance, per-CPU bars of the two kernels,
their samples), junit (a test case per tested commit or A/B side, for CI).

EXAMPLES
   kbisect report --state ~/linux/.git/kbisect/run-1a2b3c4d5e6f
   kbisect report --state DIR --format markdown > report.md
   kbisect report --state DIR --format html -o report.html
   kbisect report --state DIR --format json | jq .tested`,
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
	switch o.Format {
	case "text", "markdown", "json", "html", "junit":
	default:
		return usagef("report --format %q: give text, markdown, json, html or junit", o.Format)
	}
	return report.WriteOutput(o.Output, stdout, func(w io.Writer) error { return report.FromState(ctx, o.State, o.Format, w) })
}
