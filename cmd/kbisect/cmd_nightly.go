package main

import (
	"context"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"kbisect/nightly"
	"kbisect/progress"
	"kbisect/report"
)

// exitRegression is nightly's answer when the newest release is noisier
// than the machine's last good one: CI marks the night red.
const exitRegression = 5

// nightlyOptions are the flags of kbisect nightly.
type nightlyOptions struct {
	Job, Remote, Branch, Tags, DB string
	JSON, Verbose                 bool
}

func nightlyCommand() *cli.Command {
	return &cli.Command{
		Name:  "nightly",
		Usage: "measure the release tags new since the last night; bisect a regression once",
		UsageText: `kbisect nightly --job FILE --remote URL|PATH [--branch B] [--tags GLOB]
       [--db FILE] [--json]`,
		Description: helpText(nightlyHelp),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "job", Usage: "the machine's job file"},
			&cli.StringFlag{Name: "remote", Usage: "the git URL or path to fetch the releases from"},
			&cli.StringFlag{Name: "branch", Usage: "the branch the releases are on (e.g. linux-6.12.y); default: any tag"},
			&cli.StringFlag{Name: "tags", Value: "v*", Usage: "the release tags to follow (a glob)"},
			&cli.StringFlag{Name: "db", Usage: "the history database (default <git-dir>/kbisect/history.db)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object on stdout at the end"},
			verboseFlag(),
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.Args().Len() > 0 {
				return usagef("nightly: unexpected argument %q", c.Args().First())
			}
			o := nightlyOptions{Job: c.String("job"), Remote: c.String("remote"), Branch: c.String("branch"), Tags: c.String("tags"),
				DB: c.String("db"), JSON: c.Bool("json"), Verbose: c.Bool("verbose")}
			return runNightly(c.Context, o, c.App.Writer, c.App.ErrWriter)
		},
	}
}

// runNightly runs one night and answers as the flags ask: the message,
// or the night's result as JSON, and the exit status its answer means.
func runNightly(ctx context.Context, o nightlyOptions, stdout, stderr io.Writer) error {
	ctx = traceTo(ctx, o.Verbose, stderr)
	res := &nightly.Result{}
	no, err := nightlySetup(ctx, o, stderr, res)
	if err == nil {
		res, err = nightly.Run(ctx, no)
	} else {
		res.Result, res.Error = nightly.Aborted, err.Error()
	}
	if o.JSON {
		report.WriteJSON(stdout, res.JSONAnswer())
		if err != nil {
			return &reportedError{err}
		}
	} else if res.Message != "" {
		fmt.Fprintln(stdout, res.Message)
	}
	if err != nil {
		return err
	}
	switch res.Result {
	case nightly.Regression, nightly.StillPresent:
		return &resultError{exitRegression}
	case nightly.Drift:
		return &resultError{exitNotReproduced}
	case nightly.Unknown:
		return &resultError{exitFailure}
	}
	return nil
}

// nightlySetup wires the night the flags ask for: what is wrong here is
// a usage error, and the night does not start.
func nightlySetup(ctx context.Context, o nightlyOptions, stderr io.Writer, res *nightly.Result) (nightly.Options, error) {
	no, err := nightly.Setup(ctx, nightly.Request{Job: o.Job, Remote: o.Remote, Branch: o.Branch, Tags: o.Tags, DB: o.DB}, stderr)
	if no.Job != nil {
		res.Machine = no.Job.Machine.Name
	}
	no.Bisect, no.Log, no.Progress = nightlyBisector(o.Verbose, stderr), stderr, progress.NewLines(stderr)
	return no, err
}
