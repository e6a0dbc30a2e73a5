package report

import (
	"context"
	"fmt"
	"io"
	"kbisect/bisect"
	"kbisect/lab"
	"strings"
)

// WriteMarkdown writes the same report in markdown, for mail and issues.
func (r *Run) WriteMarkdown(ctx context.Context, w io.Writer) {
	switch r.Result.Kind {
	case bisect.Found:
		fmt.Fprintf(w, "**First bad commit:** `%s`", r.Result.FirstBad)
		if info, err := r.Graph.Info(ctx, r.Result.FirstBad); err == nil {
			fmt.Fprintf(w, " %s (%s, %s)", info.Subject, info.Author, info.Date)
		}
		fmt.Fprintln(w)
	case bisect.Inconclusive:
		if r.Search != nil {
			fmt.Fprintln(w, "**Inconclusive:** the evidence does not single out one commit; the most likely:")
			for _, c := range r.Search.Candidates {
				if c.Probability >= 0.001 {
					fmt.Fprintf(w, "- `%s` %s\n", c.Commit, prob(c.Probability))
				}
			}
			break
		}
		fmt.Fprintln(w, "**Inconclusive:** the first bad commit is one of the skipped commits:")
		for _, c := range r.Result.Candidates {
			fmt.Fprintf(w, "- `%s`\n", c)
		}
	case bisect.NotReproduced:
		fmt.Fprintf(w, "**Not reproduced:** %s\n", r.Result.Reason)
	default:
		fmt.Fprintln(w, "**In progress:** no answer yet.")
	}
	if s := r.search(); s != "" {
		fmt.Fprintf(w, "\n%s\n", s)
	}
	if s := r.posteriorText(); s != "" {
		fmt.Fprintf(w, "\n%s\n", s)
	}
	if c := r.Confirmation; c != nil {
		state := "confirmed"
		if !c.Confirmed {
			state = "**not confirmed**"
		}
		fmt.Fprintf(w, "\nOn fresh boots, %s: first bad %s, its parent %s.\n", state, numbers(c.Culprit), numbers(c.Parent))
		for _, f := range c.Flags {
			fmt.Fprintf(w, "- %s\n", f)
		}
	}
	if rows := r.rows(ctx); len(rows) > 0 {
		fmt.Fprintf(w, "\n| commit | verdict | %s: median [range] | subject |\n|---|---|---|---|\n", r.metricName())
		for _, rw := range rows {
			fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", rw.commit.String()[:12], rw.label(), numbers(rw.ev), strings.ReplaceAll(rw.subject, "|", `\|`))
		}
	}
	good, bad := r.pair()
	if good == nil || bad == nil {
		return
	}
	if rep, err := r.compare(good, bad); err == nil {
		fmt.Fprintln(w)
		_ = WriteABSummaryMarkdown(w, rep)
	}
	for _, ev := range []*lab.Evidence{good, bad} {
		fmt.Fprintf(w, "\n`%s` (%s), the sample with the median %s:\n\n", ev.Commit[:12], ev.Release, ev.Metric)
		_ = WriteTableMarkdown(w, MedianSample(ev))
	}
	writeSetupMarkdown(w, r.Job, r.commandLine())
}
