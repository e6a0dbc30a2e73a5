package bisect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/verdict"
)

// Outcome is what a tester says of one commit.
type Outcome struct {
	Verdict  verdict.Verdict
	ExitCode *int   // the exit status of a test command, when there is one
	Note     string // a short word on why, e.g. "exit 125"
}

// TestFunc turns a commit into a verdict. An error is an infrastructure
// failure — never a verdict — and stops the bisection; a commit that cannot
// be tested is Skip.
type TestFunc func(ctx context.Context, commit plumbing.Hash) (Outcome, error)

// ResultKind names how a bisection ended, as in the JSON contract.
type ResultKind string

// The results.
const (
	Found         ResultKind = "found"
	Inconclusive  ResultKind = "inconclusive"
	NotReproduced ResultKind = "not-reproduced"
	Aborted       ResultKind = "aborted"
)

// Tested is one verdict of the session.
type Tested struct {
	Commit  plumbing.Hash
	Verdict verdict.Verdict
	Seconds float64
	Source  string
}

// Result is how a bisection ended.
type Result struct {
	Kind       ResultKind
	FirstBad   plumbing.Hash
	Candidates []plumbing.Hash
	Reason     string
	Warnings   []string
	Tested     []Tested
	Final      *Step
	// Probabilities are, for a bisection that weighs the runs of a flaky
	// test (run --exec --confidence), each candidate's probability of
	// being the first bad commit, in the order of Candidates; nil for
	// git's bisection. FailureRate is then the estimated rate at which
	// the test fails on a bad commit.
	Probabilities []float64
	FailureRate   float64
}

// Progress receives what the driver is doing, for a terminal or a log.
type Progress interface {
	Testing(step Step)
	Tested(commit plumbing.Hash, out Outcome, elapsed time.Duration)
	Warn(msg string)
}

// Drive runs the bisection to its end: it asks the session for the next
// commit, tests it, and appends the verdict to the log (synced to disk)
// before marking it, so a run killed at any point resumes where it was.
func Drive(ctx context.Context, s *Session, log *StateLog, test TestFunc, p Progress) (Result, error) {
	var res Result
	for _, r := range log.Records() {
		if r.Event == EventRange {
			res.Tested = nil // verdicts of the range before
		}
		if r.Event == EventVerdict {
			h, _ := parseHex(r.Commit)
			v, _ := verdict.Parse(string(r.Verdict))
			res.Tested = append(res.Tested, Tested{Commit: h, Verdict: v, Seconds: r.Seconds, Source: r.Source})
		}
	}
	var logErr error
	s.OnAncestorsChecked = func() {
		if logErr == nil {
			logErr = log.Append(Record{Event: EventAncestorsOK})
		}
	}
	defer func() { s.OnAncestorsChecked = nil }()
	warned := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			res.Kind = Aborted
			return res, err
		}
		step, err := s.Next()
		if err == nil {
			err = logErr
		}
		if err != nil {
			res.Kind = Aborted
			return res, err
		}
		for _, w := range step.Warnings {
			if !warned[w] {
				warned[w] = true
				res.Warnings = append(res.Warnings, w)
				p.Warn(w)
			}
		}
		switch step.Kind {
		case StepFound:
			res.Kind, res.FirstBad, res.Final = Found, step.Commit, &step
			res.Candidates = []plumbing.Hash{step.Commit}
			return res, nil
		case StepInconclusive:
			res.Kind, res.Candidates, res.Final = Inconclusive, step.Candidates, &step
			return res, nil
		case StepNotReproduced:
			res.Kind, res.Reason, res.Final = NotReproduced, step.Reason, &step
			return res, nil
		case StepTest:
		default:
			return res, fmt.Errorf("bisect: unexpected step %v", step.Kind)
		}

		p.Testing(step)
		began := time.Now()
		out, err := test(ctx, step.Commit)
		elapsed := time.Since(began)
		if err == nil && ctx.Err() != nil {
			// Interrupted while the test ran: its verdict is not trusted.
			err = ctx.Err()
		}
		if err != nil {
			res.Kind = Aborted
			if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				err = fmt.Errorf("%w (%v)", ctx.Err(), err)
			}
			return res, err
		}
		if !out.Verdict.Valid() {
			res.Kind = Aborted
			return res, fmt.Errorf("tester gave no verdict for %s", step.Commit)
		}
		rec := Record{
			Event:    EventVerdict,
			Commit:   step.Commit.String(),
			Verdict:  out.Verdict,
			Seconds:  elapsed.Seconds(),
			ExitCode: out.ExitCode,
			Source:   "test",
			Note:     out.Note,
		}
		if err := log.Append(rec); err != nil {
			res.Kind = Aborted
			return res, err
		}
		if err := s.Mark(step.Commit, out.Verdict); err != nil {
			res.Kind = Aborted
			return res, err
		}
		res.Tested = append(res.Tested, Tested{Commit: step.Commit, Verdict: out.Verdict, Seconds: elapsed.Seconds(), Source: "test"})
		p.Tested(step.Commit, out, elapsed)
	}
}
