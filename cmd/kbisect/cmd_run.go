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
	// ReportDir is where the reports go instead of the job's report.dir
	// (nightly: each incident's own state directory).
	ReportDir string
	// FindGood walks back to a good release when the good endpoint
	// measures bad (run --job); FindGoodSet says the flag was given,
	// else the job or the terminal decides.
	FindGood, FindGoodSet bool
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
		Description: `run drives a bisection to its end, unattended.

With --job FILE it bisects kernels on the job's lab machine. The revisions
are those of the job's build.tree, which is only read: every kernel is
built in kbisect's own build slots (kbisect build). First the endpoints
are measured (calibration): the bad one must be bad and the good one good
under the job's verdict rule, or the run stops as not reproduced (exit 4)
with both kernels' numbers; a ratio or auto threshold is set here. A good
endpoint that measures bad (the regression is older) is not the end with
--find-good (the default on a terminal; find_good in the job): the release
tags below it are tried, newest first with growing steps (v6.12.56,
v6.12.54, v6.12.50 …, then v6.12), each measured like any step, and the
bisection runs from the first good one to the oldest bad one; the report
says what the walk measured and cost. A bad endpoint that measures good is
never moved: the threshold, the workload or the machine is wrong. Then
each commit is built (the cache first), installed, booted with the job's
boot parameters and verified, measured as the verdict section says (more
samples while the rule is unsure), and judged. A commit that does not
build or boot is skipped (or bad: build.on_failure, boot.on_failure); an
unsure verdict after verdict.samples.max samples is a skip with its
reason; a failure of the lab (SSH, the host) is retried with backoff and
then stops the run, never a verdict. While the host measures a commit,
the two commits that can come next (after good, after bad) are built in
its build slot, incrementally (--no-build-ahead not to). Two commits that
build the same code
(kbuild's signature) share one measurement. Every commit's evidence (its
samples, the tools' raw output) goes to DIR/commits/ before its verdict is
recorded: killing kbisect and running the same command again resumes. The
default DIR is <git-dir of build.tree>/kbisect/run-<id>; a changed job file
does not resume another's verdicts. At the end: the first bad commit, the
tested commits with their numbers, and the last good and first bad kernels
compared.

With --exec CMD it is "git bisect run CMD": each candidate is checked out
(detached) in the work tree of --repo, and CMD runs at its top through
"sh -c" with KBISECT_COMMIT set to the commit. Its exit status is the
verdict: 0 good, 125 skip (cannot be tested), 1-127 except 125 bad,
anything else (or a signal) aborts the bisection. The first time CMD exits
126 or 127 (what a shell says for a command it cannot run or find), it is
run on a good revision too, and the same status there aborts: a broken
command must not mark every commit bad. The commits tested are the ones
git bisect would test, in the same order.

FLAKY TESTS: --confidence P
   A test that fails only sometimes on a bad commit fools git bisect: one
   lucky pass marks a bad commit good, and the answer is wrong. With
   --confidence P (between 0.5 and 1, e.g. 0.99) each run of CMD is
   evidence, not a verdict: a good commit always passes, a bad one fails
   at a rate that is not known and is learned from the runs. kbisect keeps
   the probability of each commit of the range being the first bad one,
   runs CMD where it tells the most, a commit run before included, and
   stops when one commit reaches P: "<sha> is the first bad commit,
   probability 0.993 after 41 runs". Exit 125 still means the commit
   cannot be tested, and it is not run again; a first bad commit that
   cannot be told from a skipped one is inconclusive, with both. When the
   budget of runs is spent (--max-runs, default 20 per step git would
   take, plus 20), the answer is inconclusive (exit 3) with the leading
   candidates and their probabilities. Expect about 4.5 times git's runs
   for a test that fails half the time on bad commits, 8.5 times for one
   that fails a third of the time, and git's runs plus about 17 for one
   that never flakes. Every --good must be an ancestor of --bad; the bad
   revision counts as failing. The runs go to the state directory like
   git's verdicts, so the same command resumes; another --confidence goes
   on from the same runs. With --job, the job file's verdict.confidence
   says how sure a verdict must be.

run refuses to start on a work tree with uncommitted changes to tracked
files, or in the middle of a git bisect, rebase or merge; untracked and
ignored files (a kernel .config, build outputs) are never touched. HEAD
and the branch are put back where they were however the run ends: found,
failed, Ctrl-C, SIGTERM or a dropped ssh session (SIGHUP). One run at a
time per work tree.

On a terminal CMD runs in kbisect's process group, as under git bisect
run: Ctrl-C stops both (no verdict is recorded for the interrupted test),
Ctrl-Z suspends both, and CMD may ask on the terminal (sudo, ssh). Without
a terminal (CI, cron, nohup) CMD gets a process group of its own, stopped
as a whole (SIGTERM, then SIGKILL after 5 s) when the run is interrupted.

Revisions are tags, branches, full or short hashes (an ambiguous short
hash is an error listing the matches), with ~N and ^N. A good revision that
is not an ancestor of the bad one is handled as git does: the merge bases
are tested first.

STATE AND RESUME
   Every verdict is appended to DIR/session.jsonl and synced before the next
   step. The default DIR is <git-dir>/kbisect/run-<id>, where <id> derives
   from the range, the command and the replayed log, so running the same
   command again resumes without repeating a test. After a crash, kill -9 or
   reboot, <git-dir>/kbisect/RUNNING remembers the run and the HEAD to put
   back, so the same command resumes even when a revision such as HEAD now
   names another commit; a test command the killed run left running is
   stopped first. DIR also holds git-bisect.log, a "git bisect log" that
   "git bisect replay" accepts, and result.json. --replay FILE starts from a
   log written by "git bisect log" (or by kbisect) and goes on from there.

OUTPUT
   Progress goes to stderr, the test command's output to stdout (stderr with
   --json). At the end: "<sha> is the first bad commit" and the commit, as
   git prints it, or with --json one object:
   {"result": "found", "first_bad": "<sha>", "candidates": ["<sha>"],
    "steps": 12, "tested": [{"commit": "<sha>", "verdict": "bad",
    "seconds": 1.2}], "state_dir": "…"}
   result is found, inconclusive (skips leave several candidates, all
   listed), not-reproduced or aborted. With --confidence it also holds
   "probability" (the first bad commit's), "probabilities" (each
   candidate's: [{"commit": "<sha>", "probability": 0.993}]) and
   "failure_rate" (how often the test fails on a bad commit).

EXIT STATUS
   0 found, 1 failure, 2 usage error, 3 inconclusive, 4 not reproduced,
   130 interrupted.

EXAMPLES
   # Which commit broke the build of this tool?
   kbisect run --repo . --good v1.2 --bad main --exec 'make >/dev/null'

   # Kernel: skip commits that do not build, judge the rest by a script.
   kbisect run --repo ~/linux --good v6.12.57 --bad v6.12.78 --first-parent \
       --exec 'make -j"$(nproc)" bzImage >/dev/null 2>&1 || exit 125; ./noise-check'

   # A test that fails on bad commits only now and then.
   kbisect run --repo . --good v1.2 --bad main --confidence 0.99 \
       --exec 'go test -count=1 -run TestRace ./...'

   # Go on from a bisection started by hand with git.
   git bisect log > my.log && git bisect reset
   kbisect run --repo ~/linux --replay my.log --exec ./noise-check`,
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
			&cli.BoolFlag{Name: "no-build-ahead", Usage: "with --job: do not build the next commits while one is measured"},
			&cli.BoolFlag{Name: "find-good", Usage: "with --job: when the good endpoint measures bad, walk back along its release tags to one that measures good and bisect from there (default: on a terminal, or find_good.enabled)"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			opts := runOptions{
				Args:        c.Args().Slice(),
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
				Verbose:      c.Bool("verbose"),
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
	switch {
	case len(o.Args) > 0:
		return usagef("run: unexpected argument %q (revisions go in --good and --bad, the test command in --exec)", o.Args[0])
	case o.Job != "" && o.Exec != "":
		return usagef("run: give --job or --exec, not both")
	case o.Job == "" && o.Exec == "":
		return usagef("run: --exec CMD is required (the test command, as for git bisect run)")
	case o.Job != "" && (o.ConfidenceSet || o.MaxRunsSet):
		return usagef("run: --confidence and --max-runs go with --exec; with --job the job file's verdict.confidence says how sure a verdict must be")
	case o.ConfidenceSet && !(o.Confidence > 0.5 && o.Confidence < 1):
		return usagef("run: --confidence %g: give a probability between 0.5 and 1 (e.g. 0.99)", o.Confidence)
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
		return answer(o.JSON, res, err, stdout, func() { res.Report.WriteText(stdout) })
	}
	ctx = traceTo(ctx, o.Verbose, stderr)
	cmdOut := stdout
	if o.JSON {
		cmdOut = stderr // stdout holds the one JSON object
	}
	res, err := run.Exec(ctx, run.ExecOptions{Range: o.bisectRange(), Repo: o.Repo, Exec: o.Exec, State: o.State,
		Confidence: o.Confidence, MaxRuns: o.MaxRuns,
		Stdout: cmdOut, Stderr: stderr, Messages: stderr, Progress: progress.NewGit(stderr)})
	defer res.Close()
	return answer(o.JSON, res, err, stdout, func() { report.WriteGitResult(stdout, res.Graph, res.Bisection) })
}

// runJob runs a bisection of kernels with its view on stderr.
func runJob(ctx context.Context, o runOptions, stderr io.Writer) (*run.Result, error) {
	view := newView(stderr)
	ctx = traceInto(ctx, o.Verbose, view)
	jo := run.JobOptions{Range: o.bisectRange(), Jobs: o.Jobs, State: o.State, NoBuildAhead: o.NoBuildAhead,
		ReportDir: o.ReportDir, Messages: stderr, Interactive: tty.Interactive(stderr) && os.Getenv("CI") == "", Progress: view}
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

// newView is the view of long work on w: a status line on a terminal,
// time-stamped lines elsewhere.
func newView(w io.Writer) *progress.View {
	if tty.Interactive(w) {
		return progress.NewTerminal(w)
	}
	return progress.NewLines(w)
}
