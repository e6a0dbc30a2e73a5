package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/urfave/cli/v2"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/lab"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "render a run's result and evidence from its state directory, also while it runs",
		Description: `report reads the state directory of a kbisect run --job and prints what
run prints at its end: the answer (or "in progress"), the confirmation of
the first bad commit, the tested kernels oldest first with their numbers,
and the last good and first bad kernels compared with their per-CPU
tables. It takes no lock: it works while the run goes on.

EXAMPLES
   kbisect report --state ~/linux/.git/kbisect/run-1a2b3c4d5e6f
   kbisect report --state DIR --format markdown > report.md
   kbisect report --state DIR --format json | jq .tested`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "state", Required: true, Usage: "the run's state directory"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text, markdown or json"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			return runReport(c.Context, c.String("state"), c.String("format"), c.App.Writer)
		},
	}
}

func runReport(ctx context.Context, dir, format string, stdout io.Writer) error {
	switch format {
	case "text", "markdown", "json":
	default:
		return usagef("report --format %q: give text, markdown or json", format)
	}
	records, err := bisect.ReadState(dir)
	if err != nil {
		return usagef("report --state: %v", err)
	}
	if len(records) == 0 || records[0].Event != bisect.EventStart {
		return usagef("report --state %s: the session log does not begin with a start record", dir)
	}
	start := records[0]
	var job *configs.Job
	tree := start.Meta["repo"]
	if _, err := os.Stat(filepath.Join(dir, "job.yaml")); err == nil {
		// The job file as the run used it.
		if job, err = configs.Load(filepath.Join(dir, "job.yaml"), configs.LoadOptions{}); err != nil {
			return err
		}
		tree = string(job.Build.Tree)
	}
	g, err := bisect.OpenGraph(tree)
	if err != nil {
		return fmt.Errorf("the run's tree %s: %w", tree, err)
	}
	defer g.Close()
	sess, _, err := bisect.Restore(g, records)
	if err != nil {
		return err
	}
	res := bisect.Result{}
	for _, r := range records {
		if r.Event == bisect.EventVerdict {
			h, _ := hashOf(r.Commit)
			v, _ := bisect.ParseVerdict(r.Verdict)
			res.Tested = append(res.Tested, bisect.Tested{Commit: h, Verdict: v, Seconds: r.Seconds, Source: r.Source})
		}
	}
	rep := &jobReport{g: g, job: job, stateDir: dir, start: start}
	if rep.cal, err = lab.ReadCalibration(dir); err != nil {
		return err
	}
	if rep.conf, err = lab.ReadConfirmation(dir); err != nil {
		return err
	}
	switch {
	case rep.cal != nil && !rep.cal.Reproduced:
		res.Kind, res.Reason = bisect.NotReproduced, rep.cal.Reason
	case job != nil && rep.cal == nil:
		// Calibrating: nothing decided yet.
	default:
		step, err := sess.Next()
		if err != nil {
			return err
		}
		switch step.Kind {
		case bisect.StepFound:
			res.Kind, res.FirstBad, res.Candidates = bisect.Found, step.Commit, []plumbing.Hash{step.Commit}
		case bisect.StepInconclusive:
			res.Kind, res.Candidates = bisect.Inconclusive, step.Candidates
		case bisect.StepNotReproduced:
			res.Kind, res.Reason = bisect.NotReproduced, step.Reason
		}
		res.Warnings = step.Warnings
	}
	rep.res = res
	switch format {
	case "json":
		out := toJSON(res, dir, nil)
		if res.Kind == "" {
			out.Result = "in-progress"
		}
		rep.addToJSON(&out)
		writeRunJSON(stdout, out)
	case "markdown":
		rep.writeMarkdown(stdout)
	default:
		rep.writeText(stdout)
	}
	return nil
}
