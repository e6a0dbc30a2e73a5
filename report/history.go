package report

import (
	"fmt"
	"io"
	"kbisect/internal/commitid"
	"kbisect/noise"
	"kbisect/verdict"
	"slices"
	"strings"
	"time"
)

// History is what the nightly runs measured on a machine, as kbisect
// history shows it; its JSON is history --format json.
type History struct {
	Machine string        `json:"machine"`
	Trees   []HistoryTree `json:"trees"`
}

// HistoryTree is the machine's history on one tree the nightly follows.
type HistoryTree struct {
	Remote string `json:"remote"`
	Branch string `json:"branch,omitempty"`
	// Measurements are in version order, oldest first.
	Measurements []HistoryMeasurement `json:"measurements"`
	Incidents    []Incident           `json:"incidents"`
}

// HistoryMeasurement is one release measured on the machine, as judged.
type HistoryMeasurement struct {
	Tag        string          `json:"tag"`
	Commit     string          `json:"commit"`
	Metric     string          `json:"metric"`
	Kind       string          `json:"kind"`
	Values     []float64       `json:"values"`
	Median     float64         `json:"median"`
	Threshold  float64         `json:"threshold"`
	Verdict    verdict.Verdict `json:"verdict"`
	Reason     string          `json:"reason"`
	Baseline   string          `json:"baseline,omitempty"`
	MeasuredAt time.Time       `json:"measured_at"`
}

// Incident is a regression the nightly found between two releases, and
// what its bisection answered.
type Incident struct {
	ID        int64  `json:"id"`
	LastGood  string `json:"last_good"`
	FirstBad  string `json:"first_bad_tag"`
	Result    string `json:"result"`
	Commit    string `json:"first_bad_commit,omitempty"`
	Subject   string `json:"subject,omitempty"`
	StateDir  string `json:"state_dir"`
	ClosedTag string `json:"closed_tag,omitempty"`
}

// Culprit is what the incident's bisection named, in a few words.
func (i Incident) Culprit() string {
	switch i.Result {
	case "found":
		return fmt.Sprintf("first bad commit %s %q", commitid.Short(i.Commit), i.Subject)
	case "":
		return "not bisected"
	}
	return "bisection " + i.Result
}

// state is whether the incident is open or which release fixed it.
func (i Incident) state() string {
	if i.ClosedTag != "" {
		return "fixed in " + i.ClosedTag
	}
	return "open"
}

// HistoryFormats are the formats of kbisect history.
var HistoryFormats = []string{"text", "html", "json"}

// WriteHistory writes the history in one of HistoryFormats (text when it
// is none of them); html draws metric, the job's verdict.metric.
func WriteHistory(w io.Writer, h History, format, metric string, generated time.Time) error {
	switch format {
	case "json":
		return WriteHistoryJSON(w, h)
	case "html":
		return WriteHistoryHTML(w, h, metric, generated)
	}
	WriteHistoryText(w, h)
	return nil
}

// WriteHistoryJSON writes the history as history --format json.
func WriteHistoryJSON(w io.Writer, h History) error {
	b, err := MarshalJSON(h)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// WriteHistoryText writes the history as a table per tree, then the
// tree's incidents.
func WriteHistoryText(w io.Writer, h History) {
	value := noise.FormatValue
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
				mark = " (threshold " + value(m.Kind, m.Threshold) + ")" + mark
			}
			fmt.Fprintf(w, "  %-16s %s  %-5s %14s%s\n", m.Tag, m.MeasuredAt.Local().Format("2006-01-02 15:04"), m.Verdict,
				value(m.Kind, m.Median), mark)
		}
		for _, inc := range t.Incidents {
			fmt.Fprintf(w, "  incident %d: %s good, %s bad: %s; %s\n", inc.ID, inc.LastGood, inc.FirstBad, inc.Culprit(), inc.state())
		}
	}
}

// WriteHistoryHTML writes the history as one HTML page: the metric (the
// job's verdict.metric) per release with its threshold, each incident's
// first bad release marked, and the text history under it.
func WriteHistoryHTML(w io.Writer, h History, metric string, generated time.Time) error {
	return WriteHTML(w, historyDocument(h, metric, historyText(h), generated))
}

func historyText(h History) string {
	var b strings.Builder
	WriteHistoryText(&b, h)
	return b.String()
}

// historyDocument is the history as a report document: the releases
// measured as the tested rows, oldest first.
func historyDocument(h History, metric, text string, generated time.Time) *Document {
	d := &Document{Kind: "history", Title: "kbisect history: " + h.Machine, Result: "history", Machine: h.Machine,
		Text: text, Generated: generated.UTC().Format(time.RFC3339)}
	d.Metric.Name, d.Metric.Label, d.Metric.HigherIsBad = metric, metric, true
	for _, t := range h.Trees {
		firstBad := map[string]bool{}
		for _, inc := range t.Incidents {
			firstBad[inc.FirstBad] = true
			d.Summary = append(d.Summary, fmt.Sprintf("incident %d: %s good, %s bad, %s; %s", inc.ID, inc.LastGood, inc.FirstBad,
				inc.Culprit(), inc.state()))
		}
		for _, m := range t.Measurements {
			d.Metric.Kind = m.Kind
			if m.Threshold > 0 {
				d.Metric.Threshold, d.Metric.HasThreshold = m.Threshold, true
			}
			d.Tested = append(d.Tested, measuredRow(Tested{Commit: m.Commit, Subject: m.Tag, Verdict: m.Verdict, Culprit: firstBad[m.Tag],
				Values: m.Values, Note: m.Reason}))
		}
	}
	if len(d.Summary) == 0 {
		d.Summary = []string{fmt.Sprintf("%d releases measured, no incident", len(d.Tested))}
	}
	return d
}

// measuredRow draws a release's samples as their median within their
// whole range.
func measuredRow(t Tested) Tested {
	if len(t.Values) > 0 {
		t.Median, t.Low, t.High = noise.Median(t.Values), slices.Min(t.Values), slices.Max(t.Values)
	}
	return t
}
