package main

import (
	"context"
	"io"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"kbisect/nightly"
	"kbisect/report"
)

func historyCommand() *cli.Command {
	return &cli.Command{
		Name:        "history",
		Usage:       "what nightly measured on a machine: the metric per release, the threshold, the incidents",
		UsageText:   "kbisect history --job FILE [--format text|html|json] [--db FILE] [-o FILE]",
		Description: helpText(historyHelp),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "job", Usage: "the machine's job file"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text, html or json"},
			&cli.StringFlag{Name: "db", Usage: "the history database (default <git-dir of build.tree>/kbisect/history.db)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write to FILE instead of stdout"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.Args().Len() > 0 {
				return usagef("history: unexpected argument %q", c.Args().First())
			}
			return runHistory(c.Context, c.String("job"), c.String("format"), c.String("db"), c.String("output"), c.App.Writer, c.App.ErrWriter)
		},
	}
}

func runHistory(ctx context.Context, jobFile, format, dbPath, output string, stdout, stderr io.Writer) error {
	if jobFile == "" {
		return usagef("history: --job FILE is required")
	}
	if !slices.Contains(report.HistoryFormats, format) {
		return usagef("history --format %q: text, html or json", format)
	}
	h, job, err := nightly.MachineHistory(ctx, jobFile, dbPath, stderr)
	if err != nil {
		return err
	}
	return report.WriteOutput(output, stdout, func(w io.Writer) error {
		return report.WriteHistory(w, h, format, job.Verdict.Metric, time.Now())
	})
}
