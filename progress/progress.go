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
	// probability so far (and in kbisect's posterior search too). 0 for
	// git's bisection.
	Run         int
	Probability float64
	// Boots is, for kbisect's posterior search, its boots so far.
	Boots int
	// Forecast is where a search that forecasts its own end (kbisect's
	// posterior search) expects it; zero when it does not.
	Forecast Forecast
}

// Forecast is the boots a search expects to take until its answer (the
// one it starts now included), and the seconds they take: the median of
// the searches it ran ahead, and the range that holds most of them.
type Forecast struct {
	Boots, BootsLow, BootsHigh       int
	Seconds, SecondsLow, SecondsHigh float64
}

// String is the forecast in the words of a step's line: "~18 boots
// left (12–30), answer in 2 h 10 m (1 h 40 m – 3 h)".
func (f Forecast) String() string {
	if f.Boots <= 0 {
		return ""
	}
	s := fmt.Sprintf("~%d boot%s left", f.Boots, plural(f.Boots))
	if f.BootsLow != f.Boots || f.BootsHigh != f.Boots {
		s += fmt.Sprintf(" (%d–%d)", f.BootsLow, f.BootsHigh)
	}
	return s + fmt.Sprintf(", answer in %s (%s – %s)", span(f.Seconds), span(f.SecondsLow), span(f.SecondsHigh))
}

// span is a time left, as a person rounds it: 2 h 10 m, 45 m, 50 s.
func span(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Round(time.Second).Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d m", int(d.Round(time.Minute).Minutes()))
	}
	d = d.Round(5 * time.Minute)
	if m := int(d.Minutes()) % 60; m != 0 {
		return fmt.Sprintf("%d h %d m", int(d.Hours()), m)
	}
	return fmt.Sprintf("%d h", int(d.Hours()))
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
