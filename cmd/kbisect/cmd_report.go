package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/urfave/cli/v2"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/internal/atomicfile"
	"kbisect/lab"
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
	return writeOutput(o.Output, stdout, func(w io.Writer) error { return writeReport(ctx, o.State, o.Format, w) })
}

// reportExt is the file name extension of each report format.
var reportExt = map[string]string{"text": "txt", "markdown": "md", "json": "json", "html": "html", "junit": "junit.xml"}

// writeJobReports writes the reports the job's report.formats ask for,
// as report.<ext> in report.dir (default: the state directory), and
// returns their paths.
func writeJobReports(ctx context.Context, job *configs.Job, stateDir string) ([]string, error) {
	dir := string(job.Report.Dir)
	if dir == "" {
		dir = stateDir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, format := range job.Report.Formats {
		file := filepath.Join(dir, "report."+reportExt[format])
		if err := writeOutput(file, nil, func(w io.Writer) error { return writeReport(ctx, stateDir, format, w) }); err != nil {
			return files, fmt.Errorf("%s: %w", file, err)
		}
		files = append(files, file)
	}
	return files, nil
}

// writeOutput writes what write makes to stdout, or to the file output
// (replaced whole, once all of it is made).
func writeOutput(output string, stdout io.Writer, write func(io.Writer) error) error {
	if output == "" {
		return write(stdout)
	}
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(output, b.Bytes()); err != nil {
		return fmt.Errorf("-o: %v", err)
	}
	return os.Chmod(output, 0o644) // a report is made to be shared
}

// writeABReport renders an A/B comparison.
func writeABReport(dir, format string, res *lab.ABResult, w io.Writer) error {
	var job *configs.Job
	if _, err := os.Stat(filepath.Join(dir, "job.yaml")); err == nil {
		j, err := configs.Load(filepath.Join(dir, "job.yaml"), configs.LoadOptions{})
		if err != nil {
			return err
		}
		job = j
	}
	switch format {
	case "html":
		return report.WriteHTML(w, abDocument(job, res, time.Now()))
	case "junit":
		return report.WriteJUnit(w, abDocument(job, res, time.Now()))
	case "markdown":
		return writeABMarkdown(w, job, res)
	case "json":
		out := abResultJSON{A: abSideJSON{res.Plan.A, res.Plan.ALabel}, B: abSideJSON{res.Plan.B, res.Plan.BLabel},
			Rounds: res.Plan.Rounds, Samples: res.Plan.Samples, StateDir: dir, Result: "in-progress", Command: res.Plan.Command,
			Measured: len(res.Rounds)}
		if res.Report != nil {
			out.Result, out.Report = abVerdict(res), res.Report
		}
		writeJSON(w, out)
		return nil
	}
	return writeABText(w, job, res)
}

// writeReport renders the state directory's run or comparison.
func writeReport(ctx context.Context, dir, format string, stdout io.Writer) error {
	if ab, err := lab.ReadAB(dir); err != nil {
		return err
	} else if ab != nil {
		return writeABReport(dir, format, ab, stdout)
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
		if r.Event == bisect.EventRange {
			res.Tested = nil // verdicts of the range before
		}
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
	_, ended := os.Stat(filepath.Join(dir, "result.json"))
	switch {
	case rep.cal != nil && !rep.cal.Reproduced && rep.cal.GoodIsBad && rep.cal.Search == nil && ended != nil:
		// The good endpoint measured bad and the run has not ended: it
		// walks back along the releases (find-good), or stopped there.
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
	case "html":
		return report.WriteHTML(stdout, rep.document(time.Now()))
	case "junit":
		return report.WriteJUnit(stdout, rep.document(time.Now()))
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
