package nightly

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"kbisect/internal/atomicfile"
	"kbisect/lab"
	"kbisect/noise"
	"kbisect/report"
)

// writeReports writes the night's reports, the formats report.formats
// asks for, as night.<ext> in report.dir (default the machine's nightly
// directory), each replaced whole: text for mail, markdown, JSON (the
// night's Result), HTML (the history with its plot, headed by the
// night), JUnit (a test case per release measured tonight, and one that
// fails when the machine has a regression or drifted).
func (n *night) writeReports(ctx context.Context, failure error) ([]string, error) {
	msg := n.res.Message
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
	night := &report.Night{Machine: n.job.Machine.Name, Result: string(n.res.Result), Message: msg, Metric: n.job.Verdict.Metric,
		Kind: n.kind(), History: report.History{Machine: n.job.Machine.Name, Trees: []report.HistoryTree{tree}},
		Generated: time.Now()}
	for _, m := range n.rows {
		night.Measured = append(night.Measured, measurementOf(m))
	}
	var files []string
	for _, format := range n.job.Report.Formats {
		file := filepath.Join(dir, "night."+report.FileExt[format])
		err := writeWhole(file, func(w io.Writer) error {
			switch format {
			case "json":
				b, err := json.MarshalIndent(n.res, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(w, string(b))
				return err
			case "markdown":
				return report.WriteNightMarkdown(w, night)
			case "html":
				return report.WriteNightHTML(w, night)
			case "junit":
				return report.WriteNightJUnit(w, night)
			}
			return report.WriteNightText(w, night)
		})
		if err != nil {
			return files, fmt.Errorf("%s: %w", file, err)
		}
		files = append(files, file)
	}
	return files, nil
}

// kind is the metric's kind, as the history has it.
func (n *night) kind() string {
	if k, err := lab.MetricKind(n.job); err == nil {
		return k
	}
	return noise.KindTime
}

// writeWhole replaces a report file with what write makes, once all of
// it is made, readable by all: a report is made to be shared. Its error
// is worded as kbisect report -o words it, as it always was.
func writeWhole(file string, write func(io.Writer) error) error {
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(file, b.Bytes()); err != nil {
		return fmt.Errorf("-o: %v", err)
	}
	return os.Chmod(file, 0o644)
}
