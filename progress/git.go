package progress

import (
	"fmt"
	"io"
	"sync"

	"kbisect/internal/commitid"
	"kbisect/verdict"
)

// Git renders a bisection's steps as git bisect run prints them, without
// times: for kbisect run --exec, whose users read git's lines.
type Git struct {
	mu sync.Mutex
	w  io.Writer
}

// NewGit writes to w.
func NewGit(w io.Writer) *Git { return &Git{w: w} }

// Emit renders the steps, verdicts, warnings, lines and commands.
func (g *Git) Emit(e Event) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch e.Kind {
	case Testing:
		if e.Step.Run > 0 {
			fmt.Fprintf(g.w, "Running the test on %s (run %d of this commit; the most probable first bad commit is at %.3f)\n",
				commitid.Short(e.Commit), e.Step.Run, e.Step.Probability)
		} else if e.Step.MergeBase {
			fmt.Fprintln(g.w, "Bisecting: a merge base must be tested")
		} else {
			fmt.Fprintf(g.w, "Bisecting: %d revision%s left to test after this (roughly %d step%s)\n",
				e.Step.Left, plural(e.Step.Left), e.Step.Estimate, plural(e.Step.Estimate))
		}
		fmt.Fprintf(g.w, "[%s] %s\n", e.Commit, e.Subject)
	case Tested:
		if e.Step.Run > 0 {
			fmt.Fprintf(g.w, "%s %s (%s, %.1fs)\n", commitid.Short(e.Commit), runOutcome(e.Verdict), e.Text, e.Elapsed.Seconds())
			return
		}
		fmt.Fprintf(g.w, "%s is %s (%s, %.1fs)\n", commitid.Short(e.Commit), e.Verdict, e.Text, e.Elapsed.Seconds())
	case Warning:
		fmt.Fprintf(g.w, "warning: %s\n", e.Text)
	case Line, Command:
		fmt.Fprintln(g.w, e.Text)
	}
}

// runOutcome says what one run of a flaky test did.
func runOutcome(v verdict.Verdict) string {
	switch v {
	case verdict.Good:
		return "passed"
	case verdict.Bad:
		return "failed"
	case verdict.Skip:
		return "cannot be tested"
	}
	return string(v)
}
