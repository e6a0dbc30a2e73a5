package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/internal/commitid"
	"kbisect/internal/tty"
	"kbisect/lab"
	"kbisect/noise"
)

// jobView shows a run --job as it goes. On a terminal: one status line,
// redrawn in place (phase, commit and subject, step k of about n, samples
// with the last value, elapsed and an ETA), above which verdicts scroll.
// Elsewhere (CI, a log file): plain timestamped lines.
type jobView struct {
	mu    sync.Mutex
	w     io.Writer
	g     *bisect.Graph
	tty   bool
	now   func() time.Time
	start time.Time

	step, estimate int
	commit         string
	subject        string
	phase          lab.Phase
	samples        int
	value          string
	stepStart      time.Time
	spent          []time.Duration // per tested step
	shown          bool
	// labels name commits in place of the step (A/B: "A", "B").
	labels map[string]string
}

func newJobView(w io.Writer, g *bisect.Graph) *jobView {
	v := &jobView{w: w, g: g, now: time.Now, tty: tty.Interactive(w)}
	v.start = v.now()
	return v
}

// Line prints a line that stays: on a terminal, above the status line.
func (v *jobView) Line(format string, args ...any) {
	if v.tty {
		if v.shown {
			fmt.Fprint(v.w, "\r\033[K")
		}
		fmt.Fprintf(v.w, format+"\n", args...)
		v.draw()
		return
	}
	fmt.Fprintf(v.w, "%s "+format+"\n", append([]any{v.now().Format("15:04:05")}, args...)...)
}

// draw redraws the status line (terminal only).
func (v *jobView) draw() {
	if !v.tty || v.commit == "" {
		return
	}
	var b strings.Builder
	if l := v.labels[v.commit]; l != "" {
		fmt.Fprintf(&b, "\r\033[K[%s] %-7s %s", l, v.phase, commitid.Short(v.commit))
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
	if v.phase == lab.PhaseMeasure && v.samples > 0 {
		fmt.Fprintf(&b, " | %d sample%s, last %s", v.samples, plural(v.samples), v.value)
	}
	fmt.Fprintf(&b, " | %s", clock(v.now().Sub(v.start)))
	if eta, ok := v.eta(); ok {
		fmt.Fprintf(&b, ", ETA %s", clock(eta))
	}
	fmt.Fprint(v.w, b.String())
	v.shown = true
}

// eta is the time left: the mean step so far times the steps left.
func (v *jobView) eta() (time.Duration, bool) {
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

func clock(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%d:%02d", m, s)
}

// Event receives the pipeline's events.
func (v *jobView) Event(e lab.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if e.Commit != v.commit {
		// Calibration: the endpoints are tested outside the steps.
		v.commit, v.subject, v.samples = e.Commit, v.subjectOf(e.Commit), 0
	}
	v.phase = e.Phase
	who := commitid.Short(e.Commit)
	if l := v.labels[e.Commit]; l != "" {
		who = l + " " + who
	}
	if e.Host != "" {
		who = e.Host + ": " + who // several machines at once
	}
	switch {
	case e.Note != "":
		v.Line("%s %s: %s", who, e.Phase, e.Note)
	case e.Phase == lab.PhaseMeasure:
		v.samples, v.value = e.Sample, noise.FormatValue(e.Kind, e.Value)
		if !v.tty {
			v.Line("%s sample %d: %s", who, e.Sample, v.value)
		}
	case !v.tty:
		v.Line("%s %s", who, e.Phase)
	}
	v.draw()
}

func (v *jobView) subjectOf(commit string) string {
	if h, ok := bisect.ParseHash(commit); ok {
		if info, err := v.g.Info(h); err == nil {
			return info.Subject
		}
	}
	return ""
}

// command prints a command as it starts (-v).
func (v *jobView) command(text string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.Line("%s", text)
}

// Note prints what happens beside the step (a build ahead), as a plain
// line off a terminal and not at all on one (the status line is enough).
func (v *jobView) Note(commit, what string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.tty {
		v.Line("%s %s", commitid.Short(commit), what)
	}
}

// Testing implements bisect.Progress.
func (v *jobView) Testing(step bisect.Step) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.step++
	v.estimate = step.Estimate
	v.commit, v.subject, v.samples, v.phase = step.Commit.String(), v.subjectOf(step.Commit.String()), 0, lab.PhaseBuild
	v.stepStart = v.now()
	left := fmt.Sprintf("%d revision%s left to test after this (roughly %d step%s)", step.Left, plural(step.Left), step.Estimate, plural(step.Estimate))
	if step.MergeBase {
		left = "a merge base must be tested"
	}
	v.Line("Bisecting: %s\n[%s] %s", left, step.Commit, v.subject)
}

// Tested implements bisect.Progress.
func (v *jobView) Tested(commit plumbing.Hash, out bisect.Outcome, elapsed time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.spent = append(v.spent, elapsed)
	v.Line("%s is %s (%s, %s)", commit.String()[:12], out.Verdict, out.Note, clock(elapsed))
}

// Warn implements bisect.Progress.
func (v *jobView) Warn(msg string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.Line("warning: %s", msg)
}

// Done clears the status line.
func (v *jobView) Done() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.tty && v.shown {
		fmt.Fprint(v.w, "\r\033[K")
		v.shown = false
	}
}
