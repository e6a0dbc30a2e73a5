package report

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/internal/atomicfile"
	"kbisect/internal/usage"
	"kbisect/lab"
	"kbisect/verdict"
)

// WriteFiles writes the reports the job's report.formats ask for, as
// report.<ext> in report.dir (default: the state directory), and returns
// their paths.
func WriteFiles(ctx context.Context, job *configs.Job, stateDir string) ([]string, error) {
	dir := string(job.Report.Dir)
	if dir == "" {
		dir = stateDir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, format := range job.Report.Formats {
		file := filepath.Join(dir, "report."+FileExt[format])
		if err := WriteOutput(file, nil, func(w io.Writer) error { return FromState(ctx, stateDir, format, w) }); err != nil {
			return files, fmt.Errorf("%s: %w", file, err)
		}
		files = append(files, file)
	}
	return files, nil
}

// WriteOutput writes what write makes to stdout, or to the file output
// (replaced whole, once all of it is made).
func WriteOutput(output string, stdout io.Writer, write func(io.Writer) error) error {
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

// writeAB renders an A/B comparison.
func writeAB(dir, format string, res *lab.ABResult, w io.Writer) error {
	job, err := stateJob(dir, "")
	if err != nil {
		return err
	}
	switch format {
	case "html":
		return WriteHTML(w, ABDocument(job, res, time.Now()))
	case "junit":
		return WriteJUnit(w, ABDocument(job, res, time.Now()))
	case "markdown":
		return WriteABMarkdown(w, job, res)
	case "json":
		out := ABResultJSONOf(res.Plan, dir)
		out.Result, out.Measured = "in-progress", len(res.Rounds)
		if res.Report != nil {
			out.Result, out.Report = ABVerdict(res), res.Report
		}
		WriteJSON(w, out)
		return nil
	}
	return WriteABText(w, job, res)
}

// FromState renders the state directory's run or comparison in one of
// FileExt's formats.
func FromState(ctx context.Context, dir, format string, stdout io.Writer) error {
	if _, ok := FileExt[format]; !ok {
		return usage.Errorf("report --format %q: give text, markdown, json, html or junit", format)
	}
	if ab, err := lab.ReadAB(dir); err != nil {
		return err
	} else if ab != nil {
		return writeAB(dir, format, ab, stdout)
	}
	records, err := bisect.ReadState(dir)
	if err != nil {
		return usage.Errorf("report --state: %v", err)
	}
	if len(records) == 0 || records[0].Event != bisect.EventStart {
		return usage.Errorf("report --state %s: the session log does not begin with a start record", dir)
	}
	start := records[0]
	if start.Meta["flaky"] != "" {
		// Its verdicts are runs, not git's: the session would misread them.
		return usage.Errorf("report --state %s: a run --exec --confidence is not rendered; its answer is %s", dir, filepath.Join(dir, "result.json"))
	}
	tree := start.Meta["repo"]
	job, err := stateJob(dir, start.Meta["job"])
	if err != nil {
		return err
	}
	if job != nil {
		tree = string(job.Build.Tree)
	}
	g, err := bisect.OpenGraph(ctx, tree)
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
			h, _ := bisect.ParseHash(r.Commit)
			v, _ := verdict.Parse(string(r.Verdict))
			res.Tested = append(res.Tested, bisect.Tested{Commit: h, Verdict: v, Seconds: r.Seconds, Source: r.Source})
		}
	}
	rep := &Run{Graph: g, Job: job, StateDir: dir, Start: start}
	if rep.Calibration, err = lab.ReadCalibration(dir); err != nil {
		return err
	}
	if rep.Confirmation, err = lab.ReadConfirmation(dir); err != nil {
		return err
	}
	if rep.Search, err = lab.ReadSearchSummary(dir); err != nil {
		return err
	}
	_, ended := os.Stat(filepath.Join(dir, "result.json"))
	switch {
	case rep.Calibration != nil && !rep.Calibration.Reproduced && rep.Calibration.GoodIsBad && rep.Calibration.Search == nil && ended != nil:
		// The good endpoint measured bad and the run has not ended: it
		// walks back along the releases (find-good), or stopped there.
	case rep.Calibration != nil && !rep.Calibration.Reproduced:
		res.Kind, res.Reason = bisect.NotReproduced, rep.Calibration.Reason
	case job != nil && rep.Calibration == nil:
		// Calibrating: nothing decided yet.
	case rep.Search != nil:
		res = resultOfSearch(rep.Search)
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
	rep.Result = res
	if res.Kind == "" && !bisect.StateRunning(dir) {
		at := records[len(records)-1].Time
		if fi, err := os.Stat(filepath.Join(dir, "search.jsonl")); err == nil && fi.ModTime().After(at) {
			at = fi.ModTime() // a posterior search's boots
		}
		rep.Stopped = &StoppedJSON{At: at.UTC(), Resume: start.Meta["command"]}
	}
	switch format {
	case "html":
		return WriteHTML(stdout, rep.Document(ctx, time.Now()))
	case "junit":
		return WriteJUnit(stdout, rep.Document(ctx, time.Now()))
	case "json":
		out := RunJSONOf(res, dir, nil)
		if res.Kind == "" {
			out.Result = "in-progress"
		}
		rep.AddTo(ctx, &out)
		WriteJSON(stdout, out)
	case "markdown":
		rep.WriteMarkdown(ctx, stdout)
	default:
		rep.WriteText(ctx, stdout)
	}
	return nil
}

// stateJob loads the job the state directory keeps (nil without one). A
// state of this kbisect keeps it resolved, whole; an older one kept the
// job file as written, whose includes name files beside the original
// (given as orig), which is read then.
func stateJob(dir, orig string) (*configs.Job, error) {
	path := filepath.Join(dir, "job.yaml")
	if _, err := os.Stat(path); err != nil {
		return nil, nil
	}
	// Only whether a secret is set is asked: a report needs none.
	opt := configs.LoadOptions{LookupEnv: func(string) (string, bool) { return "", true }}
	job, err := configs.Load(path, opt)
	if err == nil {
		return job, nil
	}
	if orig != "" {
		if j, err2 := configs.Load(orig, opt); err2 == nil {
			return j, nil
		}
	}
	return nil, fmt.Errorf("report --state %s: the run's job: %w", dir, err)
}
