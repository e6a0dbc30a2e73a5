// Package run holds the use cases that measure kernels to an answer.
// "Bisect this range": for kernels on lab machines (Job: calibrate the
// endpoints, walk back to a good release when asked, bisect, confirm the
// culprit on fresh boots, write the reports) and for any test command as
// git bisect run does (Exec). "Compare these two kernels" (AB): alternating
// rounds on fresh boots, with or without a commit or a patch. Every verdict goes
// to a state directory before the next step, and the same options resume
// a run from it. The CLI, the nightly and the demo call it; it returns a
// typed result and tells how it goes as progress events, and knows nothing of
// flags or terminals. "Plan a bisection" (SimulateConfig): kbisect
// simulate's config, its noise learned from real boots.
//
// It may import bisect, configs, culprit (the posterior search), history
// (read, for a simulation), lab, kbuild, noise, progress, remote (a host's
// facts), report, simulate (its config), testcmd, verdict, worktree and
// the internal helper packages; never cmd, nightly or the simulated lab.
package run

import (
	"io"

	"kbisect/bisect"
	"kbisect/progress"
	"kbisect/report"
)

// Range is what to bisect: revisions as the user typed them, or a log
// written by git bisect log (or by kbisect) to go on from.
type Range struct {
	Goods       []string
	Bad         string
	Replay      string
	FirstParent bool
}

// JobOptions bisect kernels on the machines of one or more job files.
type JobOptions struct {
	Range
	// Jobs are the job files, one per identical machine; the first one's
	// build, workload and verdict rule are the run's.
	Jobs []string
	// State is the state directory (default: <git-dir of build.tree>/
	// kbisect/run-<id>).
	State string
	// Command is the command line that makes the run, kept in the state
	// for kbisect report to say how a run that stopped is resumed.
	Command string
	// Reproduce is the command the report gives to reproduce the run
	// ("": kbisect run with the job and the range; the demo's is itself).
	Reproduce string
	// NoBuildAhead turns off building the next commits while one is
	// measured.
	NoBuildAhead bool
	// ReportDir is where the reports go instead of the job's report.dir
	// (the nightly: each incident's own directory).
	ReportDir string
	// FindGood walks back to a good release when the good endpoint
	// measures bad; nil leaves it to the job's find_good.enabled, else to
	// Interactive.
	FindGood *bool
	// Interactive says a person watches (a terminal, not CI).
	Interactive bool
	// RetrySkips measures the commits a resumed run skipped again: their
	// skips leave the session log and the search journal, their evidence
	// is kept aside (commits/<hash>.skipped-<n>.json).
	RetrySkips bool
	// Messages gets kbisect's own lines (resuming, the job's warnings).
	Messages io.Writer
	// Progress hears how the run goes (nil: nothing).
	Progress progress.Sink
}

// ExecOptions bisect with a test command, as git bisect run does.
type ExecOptions struct {
	Range
	Repo  string
	Exec  string
	State string
	// Confidence, when not 0, bisects a flaky test: every run of Exec is
	// evidence (exit 0 a pass, 1–127 but 125 a failure), a commit is run
	// again as often as the posterior over the range needs, and the
	// first bad commit is named once its probability reaches Confidence
	// (between 0.5 and 1). 0 is git bisect run's exact bisection.
	Confidence float64
	// MaxRuns is the budget of runs with Confidence (0: 20 per step git
	// would take, plus 20); when it runs out the answer is inconclusive.
	MaxRuns int
	// Stdout and Stderr get the test command's output.
	Stdout, Stderr io.Writer
	// Messages gets kbisect's own lines.
	Messages io.Writer
	// Progress hears the bisection's steps (nil: nothing).
	Progress progress.Sink
}

// Result is how a run ended. Its graph stays open for the caller to
// render the answer: Close it when done.
type Result struct {
	// Kind is found, inconclusive, not-reproduced or aborted.
	Kind bisect.ResultKind
	// JSON is the answer as --json prints it and result.json keeps it.
	JSON report.RunJSON
	// Bisection is the session's result, with the graph it names commits
	// in (nil when the run stopped before opening its tree).
	Bisection bisect.Result
	Graph     *bisect.Graph
	// Report is the report of a run --job (nil for run --exec).
	Report *report.Run
	// Reports are the report files written (report.formats).
	Reports []string
	// Ended says the bisection ran to its end, so its answer can be
	// printed (Kind may still be aborted for a run --job whose lab failed).
	Ended bool
}

// Close releases the graph.
func (r *Result) Close() {
	if r != nil && r.Graph != nil {
		r.Graph.Close()
		r.Graph = nil
	}
}

// aborted is the result of a run that stopped before its answer.
func aborted(stateDir string, err error) *Result {
	return &Result{Kind: bisect.Aborted, JSON: report.RunJSONOf(bisect.Result{Kind: bisect.Aborted}, stateDir, err)}
}
