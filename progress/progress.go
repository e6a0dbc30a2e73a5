// Package progress is how long work tells how it goes: one Event type on
// one stream (a Sink), and its renderers: a terminal view that redraws a
// status line in place (NewTerminal), plain time-stamped lines through
// log/slog for CI, cron and log files (NewLines), and the lines git bisect
// run prints, for kbisect run --exec (NewGit). The CLI chooses one; the
// packages that do the work only emit.
//
// It imports no kbisect package but the leaves internal/commitid,
// internal/shell and verdict.
package progress

import (
	"fmt"
	"kbisect/verdict"
	"time"
)

// Kind is what an event tells.
type Kind uint8

// The kinds of events.
const (
	// Line is a line that stays: Text.
	Line Kind = iota + 1
	// Command is a command as it starts (kbisect -v): Text, whole.
	Command
	// Warning is something the user should read: Text.
	Warning
	// Note is what happens beside the step, such as a build ahead:
	// Commit and Text. A terminal leaves it to the status line.
	Note
	// Testing is a bisection step starting: Commit, Subject, Step; or
	// Text in place of Step, when the search is not git's.
	Testing
	// Tested is its verdict: Commit, Verdict, Text (why), Elapsed.
	Tested
	// Phase is what the lab does with a commit: Commit, Host, Phase, and
	// Text when something happened (from the cache, retrying …), or
	// Sample and Value while measuring.
	Phase
	// Done is the end: a terminal clears its status line.
	Done
)

// Event is one thing that happened.
type Event struct {
	Kind    Kind
	Commit  string
	Subject string
	// Label names the commit in place of the step ("A", "B").
	Label string
	// Host names the machine when several measure at once.
	Host string
	// Phase is build, boot or measure.
	Phase string
	// Sample counts the samples taken so far while measuring; Value is
	// the last one's, formatted in its unit.
	Sample int
	Value  string
	Step   Step
	// Verdict is good, bad or skip.
	Verdict verdict.Verdict
	Elapsed time.Duration
	Text    string
}

// Step is where a bisection stands as it tests a commit.
type Step struct {
	// Left is how many revisions are left to test after this one, and
	// Estimate roughly how many steps that takes (git's numbers).
	Left, Estimate int
	// MergeBase says the commit is a merge base git must test first.
	MergeBase bool
	// Run counts, for a bisection that runs commits again (a flaky
	// test: run --exec --confidence), which run of this commit this is,
	// from 1; Probability is then the most probable first bad commit's
	// probability so far. 0 for git's bisection.
	Run         int
	Probability float64
}

// Sink hears the events. Emit is called from any goroutine.
type Sink interface {
	Emit(Event)
}

// Func is a Sink.
type Func func(Event)

// Emit calls f.
func (f Func) Emit(e Event) { f(e) }

// Discard hears nothing.
var Discard Sink = Func(func(Event) {})

// Linef emits a line that stays.
func Linef(s Sink, format string, args ...any) {
	s.Emit(Event{Kind: Line, Text: fmt.Sprintf(format, args...)})
}
