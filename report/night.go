package report

import (
	"fmt"
	"io"
	"kbisect/noise"
	"kbisect/verdict"
	"strings"
	"time"
)

// Night is one nightly run on a machine, for its reports: the answer,
// the releases measured that night and the machine's history.
type Night struct {
	Machine string
	// Result is the night's answer in a word, as nightly --json says it
	// ("no-regression", "regression", "drift", ...).
	Result string
	// Message is the answer in full, one or more lines.
	Message string
	// Metric is the metric releases are judged on, Kind its kind.
	Metric, Kind string
	// Measured are the releases measured that night, in the order
	// recorded.
	Measured []HistoryMeasurement
	// History is the machine's history on the tree the night follows.
	History   History
	Generated time.Time
}

// title is the night's headline: the machine and the answer.
func (n *Night) title() string {
	return fmt.Sprintf("kbisect nightly: %s: %s", n.Machine, n.Result)
}

// WriteNightText writes the night as text for mail: the answer, the
// releases measured that night, the history.
func WriteNightText(w io.Writer, n *Night) error {
	fmt.Fprintf(w, "%s\n\n%s\n\n", n.title(), n.Message)
	if len(n.Measured) > 0 {
		n.tonight(w, false)
		fmt.Fprintln(w)
	}
	WriteHistoryText(w, n.History)
	return nil
}

// WriteNightMarkdown writes the night as markdown, the history as a
// preformatted block.
func WriteNightMarkdown(w io.Writer, n *Night) error {
	fmt.Fprintf(w, "## %s\n\n", n.title())
	for _, line := range strings.Split(n.Message, "\n") {
		fmt.Fprintf(w, "%s  \n", line)
	}
	fmt.Fprintln(w)
	if len(n.Measured) > 0 {
		fmt.Fprintln(w, "### Measured tonight")
		fmt.Fprintln(w)
		n.tonight(w, true)
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "### History")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "```")
	WriteHistoryText(w, n.History)
	fmt.Fprintln(w, "```")
	return nil
}

// tonight writes the rows of the releases measured that night, as
// measured.
func (n *Night) tonight(w io.Writer, markdown bool) {
	value := noise.FormatValue
	if markdown {
		fmt.Fprintf(w, "| release | verdict | %s | judged against | why |\n|---|---|---|---|---|\n", n.Metric)
		for _, m := range n.Measured {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", m.Tag, m.Verdict, value(m.Kind, m.Median), m.Baseline,
				strings.ReplaceAll(m.Reason, "|", "\\|"))
		}
		return
	}
	fmt.Fprintf(w, "Measured tonight (%s: the median of the samples):\n", n.Metric)
	for _, m := range n.Measured {
		against := ""
		if m.Baseline != "" {
			against = "  against " + m.Baseline
		}
		fmt.Fprintf(w, "  %-16s %-5s %14s%s\n", m.Tag, m.Verdict, value(m.Kind, m.Median), against)
	}
}

func (n *Night) text() string {
	var b strings.Builder
	_ = WriteNightText(&b, n)
	return b.String()
}

// WriteNightHTML writes the machine's history as one HTML page headed by
// the night's answer.
func WriteNightHTML(w io.Writer, n *Night) error {
	d := historyDocument(n.History, n.Metric, n.text(), n.Generated)
	d.Title, d.Result, d.Summary = n.title(), n.Result, append(strings.Split(n.Message, "\n"), d.Summary...)
	return WriteHTML(w, d)
}

// WriteNightJUnit makes CI show the night as tests: a case per release
// measured (failed when bad, skipped when it could not be judged), and
// the machine's case, failed when it has a regression, new or still
// present, or drifted, or nothing could be judged.
func WriteNightJUnit(w io.Writer, n *Night) error {
	d := &Document{Kind: "nightly", Title: n.title(), Result: n.Result, Machine: n.Machine, Text: n.text(),
		Generated: n.Generated.UTC().Format(time.RFC3339)}
	d.Metric.Name, d.Metric.Label, d.Metric.Kind = n.Metric, n.Metric, n.Kind
	for _, m := range n.Measured {
		// A release not judged good or bad (unsure, drift) is a skip
		// to CI.
		v := m.Verdict
		if v != verdict.Good && v != verdict.Bad {
			v = verdict.Skip
		}
		note := m.Reason
		if m.Baseline != "" {
			note = "against " + m.Baseline + ": " + note
		}
		d.Tested = append(d.Tested, measuredRow(Tested{Commit: m.Commit, Subject: m.Tag, Verdict: v, Values: m.Values, Note: note}))
	}
	check := Check{Name: "no regression on " + n.Machine, Detail: n.Message}
	switch n.Result {
	case "regression", "still-present", "drift", "unknown", "aborted":
		check.Failure = n.Result + ": " + strings.SplitN(n.Message, "\n", 2)[0]
	}
	d.Checks = append(d.Checks, check)
	return WriteJUnit(w, d)
}
