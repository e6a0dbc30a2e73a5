package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"kbisect/lab"
	"kbisect/noise"
	"kbisect/report"
)

// writeReports writes the night's reports, the formats report.formats
// asks for, as night.<ext> in report.dir (default the machine's nightly
// directory), each replaced whole: text for mail, markdown, JSON (what
// --json prints), HTML (the history with its plot, headed by the night),
// JUnit (a test case per release measured tonight, and one that fails
// when the machine has a regression or drifted).
func (n *night) writeReports(ctx context.Context, failure error) ([]string, error) {
	msg := n.out.Message
	if msg == "" && failure != nil {
		msg = fmt.Sprintf("%s: the night stopped: %v", n.job.Machine.Name, failure)
	}
	dir := string(n.job.Report.Dir)
	if dir == "" {
		dir = n.dir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	tree, err := historyTree(ctx, n.db, n.where)
	if err != nil {
		return nil, err
	}
	h := historyJSON{Machine: n.job.Machine.Name, Trees: []historyTreeJSON{tree}}
	var text strings.Builder
	n.writeText(&text, h, msg)
	var files []string
	for _, format := range n.job.Report.Formats {
		file := filepath.Join(dir, "night."+report.Ext[format])
		err := report.WriteOutput(file, nil, func(w io.Writer) error {
			switch format {
			case "json":
				b, err := json.MarshalIndent(n.out, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(w, string(b))
				return err
			case "markdown":
				return n.writeMarkdown(w, h, msg)
			case "html":
				d := historyDocument(h, n.job.Verdict.Metric, text.String())
				d.Title, d.Result, d.Summary = n.title(), n.out.Result, append(strings.Split(msg, "\n"), d.Summary...)
				return report.WriteHTML(w, d)
			case "junit":
				return report.WriteJUnit(w, n.junitDocument(text.String(), msg))
			}
			_, err := io.WriteString(w, text.String())
			return err
		})
		if err != nil {
			return files, fmt.Errorf("%s: %w", file, err)
		}
		files = append(files, file)
	}
	return files, nil
}

func (n *night) title() string {
	return fmt.Sprintf("kbisect nightly: %s: %s", n.job.Machine.Name, n.out.Result)
}

// tonight are the rows of the releases measured tonight, as measured.
func (n *night) tonight(w io.Writer, markdown bool) {
	if markdown {
		fmt.Fprintf(w, "| release | verdict | %s | judged against | why |\n|---|---|---|---|---|\n", n.job.Verdict.Metric)
		for _, m := range n.rows {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", m.Tag, m.Verdict, noise.FormatValue(m.Kind, m.Median), m.Baseline,
				strings.ReplaceAll(m.Reason, "|", "\\|"))
		}
		return
	}
	fmt.Fprintf(w, "Measured tonight (%s: the median of the samples):\n", n.job.Verdict.Metric)
	for _, m := range n.rows {
		against := ""
		if m.Baseline != "" {
			against = "  against " + m.Baseline
		}
		fmt.Fprintf(w, "  %-16s %-5s %14s%s\n", m.Tag, m.Verdict, noise.FormatValue(m.Kind, m.Median), against)
	}
}

// kind is the metric's kind, as the history has it.
func (n *night) kind() string {
	if k, err := lab.MetricKind(n.job); err == nil {
		return k
	}
	return noise.KindTime
}

func (n *night) writeText(w io.Writer, h historyJSON, msg string) {
	fmt.Fprintf(w, "%s\n\n%s\n\n", n.title(), msg)
	if len(n.rows) > 0 {
		n.tonight(w, false)
		fmt.Fprintln(w)
	}
	writeHistoryText(w, h)
}

func (n *night) writeMarkdown(w io.Writer, h historyJSON, msg string) error {
	fmt.Fprintf(w, "## %s\n\n", n.title())
	for _, line := range strings.Split(msg, "\n") {
		fmt.Fprintf(w, "%s  \n", line)
	}
	fmt.Fprintln(w)
	if len(n.rows) > 0 {
		fmt.Fprintln(w, "### Measured tonight")
		fmt.Fprintln(w)
		n.tonight(w, true)
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "### History")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "```")
	writeHistoryText(w, h)
	fmt.Fprintln(w, "```")
	return nil
}

// junitDocument makes CI show the night as tests: a case per release
// measured tonight (failed when bad, skipped when it could not be
// judged), and the machine's case, failed when it has a regression, new
// or still present, or drifted, or nothing could be judged.
func (n *night) junitDocument(text, msg string) *report.Document {
	d := &report.Document{Kind: "nightly", Title: n.title(), Result: n.out.Result, Machine: n.job.Machine.Name, Text: text,
		Generated: time.Now().UTC().Format(time.RFC3339)}
	d.Metric.Name, d.Metric.Label, d.Metric.Kind = n.job.Verdict.Metric, n.job.Verdict.Metric, n.kind()
	for _, m := range n.rows {
		verdict := m.Verdict
		if verdict != "good" && verdict != "bad" {
			verdict = "skip"
		}
		note := m.Reason
		if m.Baseline != "" {
			note = "against " + m.Baseline + ": " + note
		}
		t := report.Tested{Commit: m.Commit, Subject: m.Tag, Verdict: verdict, Values: m.Values, Note: note}
		if len(m.Values) > 0 {
			t.Median, t.Low, t.High = report.MedianRange(m.Values)
		}
		d.Tested = append(d.Tested, t)
	}
	check := report.Check{Name: "no regression on " + n.job.Machine.Name, Detail: msg}
	switch n.out.Result {
	case "regression", "still-present", "drift", "unknown", "aborted":
		check.Failure = n.out.Result + ": " + strings.SplitN(msg, "\n", 2)[0]
	}
	d.Checks = append(d.Checks, check)
	return d
}
