// Package nightly is kbisect nightly's use case: one night on one lab
// machine, which measures the release tags new since the last night,
// judges the newest against the machine's baseline, tells a regression
// from the machine's drift, and bisects a regression once, the night its
// tag appears.
//
// The policy (what to measure tonight, against which baseline, when a
// release is a regression, a drift, an incident) is decided by pure
// functions over releases, measurements and history records (policy.go,
// plan.go). Around them are thin adapters: git fetch of the releases,
// the machine's lock, the history database, the lab that measures, and
// the night's reports. The bisection is the caller's (a Bisector), and so
// is printing: progress goes to Options.Progress.
//
// It may import bisect, configs, history, lab, noise, progress, report,
// run (its helpers), verdict, worktree and the internal helpers; never
// the CLI.
package nightly

import (
	"context"
	"io"

	"kbisect/configs"
	"kbisect/progress"
	"kbisect/report"
	"kbisect/verdict"
)

// Options say which night to run.
type Options struct {
	// Job is the machine's job, loaded and checked; JobFile is where it
	// was read from, for the bisection.
	Job     *configs.Job
	JobFile string
	// GitDir is the git directory of the job's build.tree: the nightly's
	// own files are under its kbisect directory.
	GitDir string
	// Remote is the git URL or path the releases are fetched from,
	// Branch the branch they are on ("" for any tag), Tags the glob the
	// release tags followed match.
	Remote, Branch, Tags string
	// DB is the history database.
	DB string
	// Bisect bisects a regression between two releases.
	Bisect Bisector
	// Progress hears the night's progress: its lines and what the lab
	// does (nil: nothing).
	Progress progress.Sink
	// Log gets what the lab says as it prepares (nil: nothing).
	Log io.Writer
}

// Outcome is a night's answer in a word.
type Outcome string

// The answers of a night.
const (
	NothingNew   Outcome = "nothing-new"
	NoRegression Outcome = "no-regression"
	Fixed        Outcome = "fixed"
	Regression   Outcome = "regression"
	StillPresent Outcome = "still-present"
	Drift        Outcome = "drift"
	Unknown      Outcome = "unknown"
	Aborted      Outcome = "aborted"
)

// quiet says whether the answer is all well: nothing new, no regression
// or one fixed.
func (o Outcome) quiet() bool {
	return o == NothingNew || o == NoRegression || o == Fixed
}

// Result is a night's answer; its JSON is nightly --json.
type Result struct {
	Result   Outcome          `json:"result"`
	Machine  string           `json:"machine"`
	Measured []Measured       `json:"measured"`
	Incident *report.Incident `json:"incident,omitempty"`
	// Message is the answer as the text output says it.
	Message string `json:"message"`
	// Error is the failure that stopped the night.
	Error string `json:"error,omitempty"`
}

// Measured is a release measured by the night, as judged.
type Measured struct {
	Tag     string          `json:"tag"`
	Commit  string          `json:"commit"`
	Verdict verdict.Verdict `json:"verdict"`
	Median  float64         `json:"median"`
	Reason  string          `json:"reason"`
	// Baseline is the release it was judged against, when it was.
	Baseline string `json:"baseline,omitempty"`
}

// Bisector bisects a regression between two releases with the whole
// run pipeline. A bisection that ends without an answer is a result,
// not an error; an error that is the caller's mistake (a job file or a
// state directory the bisection refuses) is a usage error (internal/usage):
// the night writes no reports for it.
type Bisector func(ctx context.Context, req BisectRequest) (BisectResult, error)

// BisectRequest is the bisection a night asks for.
type BisectRequest struct {
	JobFile string
	// Good is the last good release tag, Bad the first bad one.
	Good, Bad string
	// StateDir is the bisection's state directory: a bisection that did
	// not end resumes from it.
	StateDir string
	// ReportDir is where the bisection's reports go.
	ReportDir string
}

// BisectResult is a bisection's answer.
type BisectResult struct {
	// Result is how it ended: found, inconclusive, not-reproduced, ...
	Result string
	// FirstBad is the first bad commit's hash, when found.
	FirstBad string
}

// JSONAnswer is the result as kbisect nightly --json prints it: measured
// is a list, empty when nothing was, never null.
func (r *Result) JSONAnswer() *Result {
	c := *r
	if c.Measured == nil {
		c.Measured = []Measured{}
	}
	return &c
}
