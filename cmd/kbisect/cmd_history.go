package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"kbisect/bisect"
	"kbisect/history"
	"kbisect/noise"
	"kbisect/report"
	"kbisect/worktree"
)

func historyCommand() *cli.Command {
	return &cli.Command{
		Name:      "history",
		Usage:     "what nightly measured on a machine: the metric per release, the threshold, the incidents",
		UsageText: "kbisect history --job FILE [--format text|html|json] [--db FILE] [-o FILE]",
		Description: `history reads the nightly database (the default of kbisect nightly, or
--db) and shows the machine of the job file: for every tree nightly
follows, each release measured with its median and verdict, oldest first,
and the incidents (the last good and first bad release, the first bad
commit, the release that fixed it). html draws the metric per release with
the threshold, the first bad releases marked.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "job", Usage: "the machine's job file"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text, html or json"},
			&cli.StringFlag{Name: "db", Usage: "the history database (default <git-dir of build.tree>/kbisect/history.db)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write to FILE instead of stdout"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.Args().Len() > 0 {
				return usagef("history: unexpected argument %q", c.Args().First())
			}
			return runHistory(c.Context, c.String("job"), c.String("format"), c.String("db"), c.String("output"), c.App.Writer, c.App.ErrWriter)
		},
	}
}

// historyJSON is history --format json.
type historyJSON struct {
	Machine string            `json:"machine"`
	Trees   []historyTreeJSON `json:"trees"`
}

type historyTreeJSON struct {
	Remote       string                `json:"remote"`
	Branch       string                `json:"branch,omitempty"`
	Measurements []historyMeasuredJSON `json:"measurements"`
	Incidents    []incidentJSON        `json:"incidents"`
}

type historyMeasuredJSON struct {
	Tag        string    `json:"tag"`
	Commit     string    `json:"commit"`
	Metric     string    `json:"metric"`
	Kind       string    `json:"kind"`
	Values     []float64 `json:"values"`
	Median     float64   `json:"median"`
	Threshold  float64   `json:"threshold"`
	Verdict    string    `json:"verdict"`
	Reason     string    `json:"reason"`
	Baseline   string    `json:"baseline,omitempty"`
	MeasuredAt time.Time `json:"measured_at"`
}

func runHistory(ctx context.Context, jobFile, format, dbPath, output string, stdout, stderr io.Writer) error {
	if jobFile == "" {
		return usagef("history: --job FILE is required")
	}
	if !slices.Contains([]string{"text", "html", "json"}, format) {
		return usagef("history --format %q: text, html or json", format)
	}
	job, err := loadJob(jobFile, stderr)
	if err != nil {
		return err
	}
	if dbPath == "" {
		wt, err := worktree.Open(ctx, string(job.Build.Tree))
		if err != nil {
			return usagef("build.tree %s: %v", job.Build.Tree, err)
		}
		dbPath = filepath.Join(wt.GitDir, "kbisect", "history.db")
	}
	db, err := history.Open(ctx, dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	trees, err := db.Trees(ctx, job.Machine.Name)
	if err != nil {
		return err
	}
	out := historyJSON{Machine: job.Machine.Name, Trees: []historyTreeJSON{}}
	for _, w := range trees {
		t, err := historyTree(ctx, db, w)
		if err != nil {
			return err
		}
		out.Trees = append(out.Trees, t)
	}
	return report.WriteOutput(output, stdout, func(w io.Writer) error {
		switch format {
		case "json":
			b, err := json.MarshalIndent(out, "", "  ")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(w, string(b))
			return err
		case "html":
			var text strings.Builder
			writeHistoryText(&text, out)
			return report.WriteHTML(w, historyDocument(out, job.Verdict.Metric, text.String()))
		}
		writeHistoryText(w, out)
		return nil
	})
}

// historyTree is a machine's history on one tree: the releases in
// version order (the order measured differs when nights were missed;
// other tags where they were measured), and the incidents.
func historyTree(ctx context.Context, db *history.DB, w history.Where) (historyTreeJSON, error) {
	t := historyTreeJSON{Remote: w.Remote, Branch: w.Branch, Measurements: []historyMeasuredJSON{}, Incidents: []incidentJSON{}}
	ms, err := db.Measurements(ctx, w)
	if err != nil {
		return t, err
	}
	incs, err := db.Incidents(ctx, w)
	if err != nil {
		return t, err
	}
	slices.SortStableFunc(ms, func(a, b history.Measurement) int {
		ra, oka := bisect.ParseRelease(a.Tag)
		rb, okb := bisect.ParseRelease(b.Tag)
		if !oka || !okb {
			return 0
		}
		return bisect.CompareReleases(ra, rb)
	})
	for _, m := range ms {
		t.Measurements = append(t.Measurements, historyMeasuredJSON{Tag: m.Tag, Commit: m.Commit, Metric: m.Metric, Kind: m.Kind, Values: m.Values,
			Median: m.Median, Threshold: m.Threshold, Verdict: m.Verdict, Reason: m.Reason, Baseline: m.Baseline, MeasuredAt: m.MeasuredAt})
	}
	for _, i := range incs {
		t.Incidents = append(t.Incidents, *incidentOf(i))
	}
	return t, nil
}

// writeHistoryText writes the history as a table per tree, then the
// incidents.
func writeHistoryText(w io.Writer, h historyJSON) {
	if len(h.Trees) == 0 {
		fmt.Fprintf(w, "%s: nothing measured yet (kbisect nightly fills the history)\n", h.Machine)
		return
	}
	for i, t := range h.Trees {
		if i > 0 {
			fmt.Fprintln(w)
		}
		where := t.Remote
		if t.Branch != "" {
			where = t.Branch + " of " + t.Remote
		}
		fmt.Fprintf(w, "%s, %s:\n", h.Machine, where)
		firstBad := map[string]int64{}
		for _, inc := range t.Incidents {
			firstBad[inc.FirstBad] = inc.ID
		}
		for _, m := range t.Measurements {
			mark := ""
			if id, ok := firstBad[m.Tag]; ok {
				mark = fmt.Sprintf("  <- incident %d", id)
			}
			if m.Baseline != "" {
				mark = " against " + m.Baseline + mark
			}
			if m.Threshold > 0 {
				mark = " (threshold " + noise.FormatValue(m.Kind, m.Threshold) + ")" + mark
			}
			fmt.Fprintf(w, "  %-16s %s  %-5s %14s%s\n", m.Tag, m.MeasuredAt.Local().Format("2006-01-02 15:04"), m.Verdict,
				noise.FormatValue(m.Kind, m.Median), mark)
		}
		for _, inc := range t.Incidents {
			state := "open"
			if inc.ClosedTag != "" {
				state = "fixed in " + inc.ClosedTag
			}
			fmt.Fprintf(w, "  incident %d: %s good, %s bad: %s; %s\n", inc.ID, inc.LastGood, inc.FirstBad,
				describeCulprit(history.Incident{Result: inc.Result, FirstBad: inc.Commit, Subject: inc.Subject}), state)
		}
	}
}

// historyDocument is the history as a report document: the releases
// measured as the tested rows, oldest first, each incident's first bad
// release marked.
func historyDocument(h historyJSON, metric, text string) *report.Document {
	d := &report.Document{Kind: "history", Title: "kbisect history: " + h.Machine, Result: "history", Machine: h.Machine,
		Text: text, Generated: time.Now().UTC().Format(time.RFC3339)}
	d.Metric.Name, d.Metric.Label, d.Metric.HigherIsBad = metric, metric, true
	for _, t := range h.Trees {
		firstBad := map[string]bool{}
		for _, inc := range t.Incidents {
			firstBad[inc.FirstBad] = true
			state := "open"
			if inc.ClosedTag != "" {
				state = "fixed in " + inc.ClosedTag
			}
			d.Summary = append(d.Summary, fmt.Sprintf("incident %d: %s good, %s bad, %s; %s", inc.ID, inc.LastGood, inc.FirstBad,
				describeCulprit(history.Incident{Result: inc.Result, FirstBad: inc.Commit, Subject: inc.Subject}), state))
		}
		for _, m := range t.Measurements {
			d.Metric.Kind = m.Kind
			if m.Threshold > 0 {
				d.Metric.Threshold, d.Metric.HasThreshold = m.Threshold, true
			}
			row := report.Tested{Commit: m.Commit, Subject: m.Tag, Verdict: m.Verdict, Culprit: firstBad[m.Tag], Values: m.Values, Note: m.Reason}
			if len(m.Values) > 0 {
				row.Median, row.Low, row.High = report.MedianRange(m.Values)
			}
			d.Tested = append(d.Tested, row)
		}
	}
	if len(d.Summary) == 0 {
		d.Summary = []string{fmt.Sprintf("%d releases measured, no incident", len(d.Tested))}
	}
	return d
}
