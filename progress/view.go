package progress

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"kbisect/internal/commitid"
)

// View renders events for a person: on a terminal one status line, redrawn
// in place (phase, commit and subject, step k of about n, samples with the
// last value, elapsed and an ETA), above which lines and verdicts scroll;
// elsewhere one time-stamped line per event, through log/slog.
type View struct {
	mu  sync.Mutex
	w   io.Writer
	tty bool
	log *slog.Logger
	now func() time.Time

	start          time.Time
	step, estimate int
	commit         string
	subject        string
	phase          string
	samples        int
	value          string
	stepStart      time.Time
	spent          []time.Duration // per tested step
	shown          bool
	label          string // of the commit on the status line
	// forecast is the search's own, when it forecasts its end: the
	// status line's step count and ETA are then its.
	forecast Forecast
}

// NewTerminal is the view for a terminal.
func NewTerminal(w io.Writer) *View {
	return &View{w: w, tty: true, now: time.Now, start: time.Now()}
}

// NewLines is the view for CI and logs: each event one line, "15:04:05
// text", written by a log/slog handler. The events' fields go with each
// record as attributes, for whoever logs them with another handler.
func NewLines(w io.Writer) *View {
	return &View{w: w, now: time.Now, start: time.Now(), log: slog.New(NewLineHandler(w))}
}

// Emit renders one event.
func (v *View) Emit(e Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch e.Kind {
	case Line, Command:
		v.line(e, "%s", e.Text)
	case Warning:
		v.line(e, "warning: %s", e.Text)
	case Note:
		if !v.tty {
			v.line(e, "%s %s", commitid.Short(e.Commit), e.Text)
		}
	case Testing:
		v.testing(e)
	case Tested:
		v.spent = append(v.spent, e.Elapsed)
		v.line(e, "%s is %s (%s, %s)", commitid.Short(e.Commit), e.Verdict, e.Text, clock(e.Elapsed))
	case Phase:
		v.phaseEvent(e)
	case Done:
		if v.tty && v.shown {
			fmt.Fprint(v.w, "\r\033[K")
			v.shown = false
		}
	}
}

func (v *View) testing(e Event) {
	v.step++
	v.estimate, v.forecast = e.Step.Estimate, e.Step.Forecast
	if f := e.Step.Forecast; f.Boots > 0 {
		v.estimate = f.Boots - 1
	}
	v.commit, v.subject, v.samples, v.phase, v.label = e.Commit, e.Subject, 0, "build", e.Label
	v.stepStart = v.now()
	if e.Text != "" {
		// A search that is not git's says where it stands its own way,
		// and where it expects to end.
		text := e.Text
		if f := e.Step.Forecast.String(); f != "" {
			text += "; " + f
		}
		v.line(e, "%s\n[%s] %s", text, e.Commit, e.Subject)
		return
	}
	left := fmt.Sprintf("%d revision%s left to test after this (roughly %d step%s)", e.Step.Left, plural(e.Step.Left), e.Step.Estimate, plural(e.Step.Estimate))
	if e.Step.MergeBase {
		left = "a merge base must be tested"
	}
	v.line(e, "Bisecting: %s\n[%s] %s", left, e.Commit, e.Subject)
}

func (v *View) phaseEvent(e Event) {
	if e.Commit != v.commit {
		// Calibration: the endpoints are tested outside the steps.
		v.commit, v.subject, v.samples = e.Commit, e.Subject, 0
	}
	v.phase, v.label = e.Phase, e.Label
	who := commitid.Short(e.Commit)
	if e.Label != "" {
		who = e.Label + " " + who
	}
	if e.Host != "" {
		who = e.Host + ": " + who // several machines at once
	}
	switch {
	case e.Text != "":
		v.line(e, "%s %s: %s", who, e.Phase, e.Text)
	case e.Phase == "measure":
		v.samples, v.value = e.Sample, e.Value
		if !v.tty {
			v.line(e, "%s sample %d: %s", who, e.Sample, e.Value)
		}
	case !v.tty:
		v.line(e, "%s %s", who, e.Phase)
	}
	v.draw()
}

// line prints a line that stays: on a terminal, above the status line.
func (v *View) line(e Event, format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	if !v.tty {
		v.log.LogAttrs(context.Background(), slog.LevelInfo, text, attrs(e)...)
		return
	}
	if v.shown {
		fmt.Fprint(v.w, "\r\033[K")
	}
	fmt.Fprintln(v.w, text)
	v.draw()
}

// attrs are an event's fields, for a structured log.
func attrs(e Event) []slog.Attr {
	var a []slog.Attr
	for _, kv := range []struct{ k, v string }{{"commit", e.Commit}, {"host", e.Host}, {"phase", e.Phase}, {"verdict", string(e.Verdict)}} {
		if kv.v != "" {
			a = append(a, slog.String(kv.k, kv.v))
		}
	}
	return a
}

// draw redraws the status line (terminal only).
func (v *View) draw() {
	if !v.tty || v.commit == "" {
		return
	}
	var b strings.Builder
	if v.label != "" {
		fmt.Fprintf(&b, "\r\033[K[%s] %-7s %s", v.label, v.phase, commitid.Short(v.commit))
	} else {
		fmt.Fprintf(&b, "\r\033[K[step %d/~%d] %-7s %s", v.step, v.step+v.estimate, v.phase, commitid.Short(v.commit))
	}
	if v.subject != "" {
		s := v.subject
		if len(s) > 40 {
			s = s[:39] + "…"
		}
		fmt.Fprintf(&b, " %s", s)
	}
	if v.phase == "measure" && v.samples > 0 {
		fmt.Fprintf(&b, " | %d sample%s, last %s", v.samples, plural(v.samples), v.value)
	}
	fmt.Fprintf(&b, " | %s", clock(v.now().Sub(v.start)))
	if f := v.forecast; f.Boots > 0 {
		// The search's own forecast, made as the step began.
		in := v.now().Sub(v.stepStart)
		left := func(s float64) time.Duration { return max(time.Duration(s*float64(time.Second))-in, 0) }
		fmt.Fprintf(&b, ", ETA %s (%s–%s)", clock(left(f.Seconds)), clock(left(f.SecondsLow)), clock(left(f.SecondsHigh)))
	} else if eta, ok := v.eta(); ok {
		fmt.Fprintf(&b, ", ETA %s", clock(eta))
	}
	fmt.Fprint(v.w, b.String())
	v.shown = true
}

// eta is the time left: the mean step so far times the steps left.
func (v *View) eta() (time.Duration, bool) {
	if len(v.spent) == 0 {
		return 0, false
	}
	var sum time.Duration
	for _, d := range v.spent {
		sum += d
	}
	mean := sum / time.Duration(len(v.spent))
	left := time.Duration(v.estimate+1)*mean - v.now().Sub(v.stepStart)
	return max(left, 0), true
}

// clock is a duration as a clock shows it: 1:02:03, or 2:03.
func clock(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%d:%02d", m, s)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
