package main

import (
	"context"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"kbisect/bisect"
	"kbisect/internal/tty"
	"kbisect/progress"
	"kbisect/report"
	"kbisect/run"
)

// runOptions are the flags of kbisect run.
type runOptions struct {
	Args        []string // stray arguments: an error
	Line        []string // the command line, for the one that resumes
	Reproduce   string   // the report's command that reproduces the run ("": run's own)
	Repo        string
	Goods       []string
	Bad         string
	Exec        string
	Job         string
	Jobs        []string // several identical machines
	FirstParent bool
	State       string
	Replay      string
	JSON        bool
	// Confidence bisects a flaky test (run --exec): 0 is git's exact
	// bisection. MaxRuns is then its budget of runs.
	Confidence float64
	MaxRuns    int
	// ConfidenceSet and MaxRunsSet say the flags were given.
	ConfidenceSet, MaxRunsSet bool
	// NoBuildAhead turns off building the next commits while one is
	// measured (run --job).
	NoBuildAhead bool
	// Verbose prints every command as it starts.
	Verbose bool
	// Progress is how the run tells how it goes on stderr: auto (a
	// status line on a terminal, time-stamped lines elsewhere), lines,
	// or json (one object a line).
	Progress string
	// ReportDir is where the reports go instead of the job's report.dir
	// (nightly: each incident's own state directory).
	ReportDir string
	// FindGood walks back to a good release when the good endpoint
	// measures bad (run --job); FindGoodSet says the flag was given,
	// else the job or the terminal decides.
	FindGood, FindGoodSet bool
	// RetrySkips measures the skipped commits of a resumed run again
	// (run --job).
	RetrySkips bool
}

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "bisect a range to the first bad commit",
		UsageText: `kbisect run --good REV [--good REV…] --bad REV --job FILE [--first-parent]
       [--state DIR] [--json]
   kbisect run --good REV [--good REV…] --bad REV --exec CMD [--repo DIR]
       [--first-parent] [--state DIR] [--replay FILE] [--json]
   kbisect run --good REV [--good REV…] --bad REV --exec CMD --confidence P
       [--max-runs N] [--repo DIR] [--first-parent] [--state DIR] [--json]`,
		Description: helpText(runHelp),
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "good", Usage: "a revision known to be good (repeatable)"},
			&cli.StringFlag{Name: "bad", Usage: "a revision known to be bad"},
			&cli.StringFlag{Name: "exec", Usage: "test each candidate with this shell command, as git bisect run"},
			&cli.StringSliceFlag{Name: "job", Usage: "bisect kernels on the lab machine of this job file: build, boot, measure, decide (repeat for identical machines: they test the next commits at once)"},
			&cli.StringFlag{Name: "repo", Value: ".", Usage: "the git work tree to bisect in"},
			&cli.BoolFlag{Name: "first-parent", Usage: "follow only the first parent of merges, as git bisect --first-parent"},
			&cli.StringFlag{Name: "state", Usage: "state directory (default: <git-dir>/kbisect/run-<id>)"},
			&cli.StringFlag{Name: "replay", Usage: "start from the verdicts of a git bisect log file"},
			&cli.Float64Flag{Name: "confidence", Usage: "with --exec: the test is flaky; run commits again until one is the first bad commit at this probability (0.5–1, e.g. 0.99)"},
			&cli.IntFlag{Name: "max-runs", Usage: "with --confidence: the budget of test runs (default: 20 per step git would take, plus 20)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object on stdout at the end"},
			verboseFlag(),
			&cli.StringFlag{Name: "progress", Value: "auto", Usage: "how the run tells how it goes on stderr: auto (a status line on a terminal, time-stamped lines elsewhere), lines, or json (one JSON object a line: each step's commit, boot, the leader's probability, and the boots and seconds left with their range)"},
			&cli.BoolFlag{Name: "retry-skips", Usage: "with --job, resuming a state directory: measure the commits it skipped again (after a lab fault an older kbisect recorded as a skip was fixed)"},
			&cli.BoolFlag{Name: "no-build-ahead", Usage: "with --job: do not build the next commits while one is measured"},
			&cli.BoolFlag{Name: "find-good", Usage: "with --job: when the good endpoint measures bad, walk back along its release tags to one that measures good and bisect from there (default: on a terminal, or find_good.enabled)"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			opts := runOptions{
				Args:        c.Args().Slice(),
				Line:        cliArgs(c),
				Repo:        c.String("repo"),
				Goods:       c.StringSlice("good"),
				Bad:         c.String("bad"),
				Exec:        c.String("exec"),
				Jobs:        c.StringSlice("job"),
				FirstParent: c.Bool("first-parent"),
				State:       c.String("state"),
				Replay:      c.String("replay"),
				JSON:        c.Bool("json"),
				Confidence:  c.Float64("confidence"),
				MaxRuns:     c.Int("max-runs"),

				ConfidenceSet: c.IsSet("confidence"),
				MaxRunsSet:    c.IsSet("max-runs"),

				NoBuildAhead: c.Bool("no-build-ahead"),
				RetrySkips:   c.Bool("retry-skips"),
				Verbose:      c.Bool("verbose"),
				Progress:     c.String("progress"),
				FindGood:     c.Bool("find-good"),
				FindGoodSet:  c.IsSet("find-good"),
			}
			return runRun(c.Context, opts, c.App.Writer, c.App.ErrWriter)
		},
	}
}

func (o *runOptions) validate() error {
	if len(o.Jobs) > 0 {
		o.Job = o.Jobs[0]
	}
	switch o.Progress {
	case "", "auto", "lines", "json":
	default:
		return usagef("run: --progress %q: give auto, lines or json", o.Progress)
	}
	switch {
	case len(o.Args) > 0:
		return usagef("run: unexpected argument %q (revisions go in --good and --bad, the test command in --exec)", o.Args[0])
	case o.Job != "" && o.Exec != "":
		return usagef("run: give --job or --exec, not both")
	case o.Job == "" && o.Exec == "":
		return usagef("run: give --job FILE (bisect kernels on a lab machine) or --exec CMD (a test command, as for git bisect run), with --good REV and --bad REV (see kbisect run --help)")
	case o.Job != "" && (o.ConfidenceSet || o.MaxRunsSet):
		return usagef("run: --confidence and --max-runs go with --exec; with --job the job file's verdict.confidence says how sure a verdict must be")
	case o.ConfidenceSet && !(o.Confidence > 0.5 && o.Confidence < 1):
		return usagef("run: --confidence %g: give a probability between 0.5 and 1 (e.g. 0.99)", o.Confidence)
	case o.RetrySkips && o.Job == "":
		return usagef("run: --retry-skips goes with --job (git bisect run's skips are the test command's exit 125)")
	case o.MaxRunsSet && !o.ConfidenceSet:
		return usagef("run: --max-runs is the budget of --confidence's runs: give --confidence too")
	case o.MaxRunsSet && o.MaxRuns < 1:
		return usagef("run: --max-runs %d: give a positive number of runs", o.MaxRuns)
	}
	return nil
}

func (o runOptions) bisectRange() run.Range {
	return run.Range{Goods: o.Goods, Bad: o.Bad, Replay: o.Replay, FirstParent: o.FirstParent}
}

// runRun runs the bisection the flags ask for and prints its answer.
func runRun(ctx context.Context, o runOptions, stdout, stderr io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.Job != "" {
		res, err := runJob(ctx, o, stderr)
		defer res.Close()
		err = resumable(ctx, err, res.JSON.StateDir, commandLine(o.Line, res.JSON.StateDir))
		return answer(o.JSON, res, err, stdout, func() { res.Report.WriteText(ctx, stdout) })
	}
	view, messages := progressView(o.Progress, stderr, progress.NewGit(stderr))
	ctx = traceInto(ctx, o.Verbose, view)
	cmdOut, cmdErr := stdout, stderr
	switch {
	case o.Progress == "json":
		cmdOut, cmdErr = messages, messages // the test's lines as events too
	case o.JSON:
		cmdOut = stderr // stdout holds the one JSON object
	}
	res, err := run.Exec(ctx, run.ExecOptions{Range: o.bisectRange(), Repo: o.Repo, Exec: o.Exec, State: o.State,
		Confidence: o.Confidence, MaxRuns: o.MaxRuns,
		Stdout: cmdOut, Stderr: cmdErr, Messages: messages, Progress: view})
	defer res.Close()
	err = resumable(ctx, err, res.JSON.StateDir, commandLine(o.Line, res.JSON.StateDir))
	return answer(o.JSON, res, err, stdout, func() { report.WriteGitResult(ctx, stdout, res.Graph, res.Bisection) })
}

// runJob runs a bisection of kernels with its view on stderr.
func runJob(ctx context.Context, o runOptions, stderr io.Writer) (*run.Result, error) {
	view, messages := progressView(o.Progress, stderr, newView(stderr))
	ctx = traceInto(ctx, o.Verbose, view)
	jo := run.JobOptions{Range: o.bisectRange(), Jobs: o.Jobs, Command: commandLine(o.Line, ""), Reproduce: o.Reproduce, State: o.State, NoBuildAhead: o.NoBuildAhead, RetrySkips: o.RetrySkips,
		ReportDir: o.ReportDir, Messages: messages, Interactive: tty.Interactive(stderr) && os.Getenv("CI") == "" && o.Progress != "json", Progress: view}
	if len(jo.Jobs) == 0 {
		jo.Jobs = []string{o.Job}
	}
	if o.FindGoodSet {
		jo.FindGood = &o.FindGood
	}
	return run.Job(ctx, jo)
}

// answer prints a run's answer: its JSON, or its text when the bisection
// ended; and maps how it ended to the exit status.
func answer(asJSON bool, res *run.Result, err error, stdout io.Writer, text func()) error {
	if asJSON {
		report.WriteJSON(stdout, res.JSON)
	} else if res.Ended {
		text()
	}
	switch {
	case err != nil && asJSON:
		return &reportedError{err}
	case err != nil:
		return err
	case res.Kind == bisect.Found:
		return nil
	case res.Kind == bisect.Inconclusive:
		return &resultError{exitInconclusive}
	case res.Kind == bisect.NotReproduced:
		return &resultError{exitNotReproduced}
	}
	return &resultError{exitFailure}
}

// progressView is the view --progress asks for on w, and where
// kbisect's own messages go: json makes them events of the view, lines
// plain lines, auto the command's own view.
func progressView(mode string, w io.Writer, auto progress.Sink) (progress.Sink, io.Writer) {
	switch mode {
	case "json":
		v := progress.NewJSON(w)
		return v, progress.Lines(v)
	case "lines":
		return progress.NewLines(w), w
	}
	return auto, w
}

// newView is the view of long work on w: a status line on a terminal,
// time-stamped lines elsewhere.
func newView(w io.Writer) *progress.View {
	if tty.Interactive(w) {
		return progress.NewTerminal(w)
	}
	return progress.NewLines(w)
}
