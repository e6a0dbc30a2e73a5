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
		Description: `nightly runs from cron, a systemd timer or a CI schedule, one job file
per machine. It fetches the branch and the tags from --remote into the
job's build.tree (git fetch: the work tree is not touched) and takes the
release tags matching --tags (default v*; with --branch, those on it)
newer than the newest one this machine has measured. The first night
measures the newest tag only: the baseline.

The newest new tag is judged against the baseline, the newest release
measured good on the machine: alone with an absolute verdict.threshold,
against the baseline's samples with a ratio or auto one (the first night's
release is the baseline). A baseline measured longer ago than
nightly.baseline_max_age is measured again beside the new release, in
alternating rounds; a new release bad against a baseline of another night
is confirmed by the baseline measured again. A baseline bad too is the
machine's drift: nothing is bisected, and the next nights measure both
again until it is quiet.

Good: recorded, and an open incident is closed ("fixed in vX"). Bad: if an
incident is open, it is reported as still present since its first bad
tag, with its first bad commit, and nothing is bisected again. Otherwise
the older new tags are measured newest first (missed nights) down to a
good one, and the range from the last good tag to the first bad one is
bisected with the whole run pipeline (a state directory per incident); the
incident and its answer are recorded.

History goes to an SQLite database (--db; default <git-dir of
build.tree>/kbisect/history.db, shared by the machines of a controller):
every tag's samples and per-CPU numbers, verdicts, incidents. kbisect
history shows it. The night's reports (report.formats: text, markdown,
json, html, junit) are written as night.<ext> in report.dir, or the
machine's nightly directory. Two nightly runs for one machine never run at
once. See docs/ci.md.

EXIT STATUS
   0 no regression (or nothing new), 5 a regression (new or still present),
   4 the machine drifted, 1 failure, 2 usage or job file error,
   130 interrupted.`,
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
