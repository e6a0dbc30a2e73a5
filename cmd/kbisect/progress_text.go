package main

import (
	"fmt"
	"io"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
)

// textProgress prints plain progress lines, as git bisect does.
type textProgress struct {
	w io.Writer
	g *bisect.Graph
}

func (p *textProgress) Testing(step bisect.Step) {
	if step.MergeBase {
		fmt.Fprintln(p.w, "Bisecting: a merge base must be tested")
	} else {
		fmt.Fprintf(p.w, "Bisecting: %d revision%s left to test after this (roughly %d step%s)\n",
			step.Left, plural(step.Left), step.Estimate, plural(step.Estimate))
	}
	subject := ""
	if info, err := p.g.Info(step.Commit); err == nil {
		subject = info.Subject
	}
	fmt.Fprintf(p.w, "[%s] %s\n", step.Commit, subject)
}

func (p *textProgress) Tested(commit plumbing.Hash, out bisect.Outcome, elapsed time.Duration) {
	fmt.Fprintf(p.w, "%s is %s (%s, %.1fs)\n", commit.String()[:12], out.Verdict, out.Note, elapsed.Seconds())
}

func (p *textProgress) Warn(msg string) { fmt.Fprintf(p.w, "warning: %s\n", msg) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
