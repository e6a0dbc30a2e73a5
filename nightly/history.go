package nightly

import (
	"context"
	"slices"

	"kbisect/bisect"
	"kbisect/history"
	"kbisect/report"
)

// ReadHistory is what the history database holds of a machine, every
// tree it was followed on, for kbisect history.
func ReadHistory(ctx context.Context, db *history.DB, machine string) (report.History, error) {
	h := report.History{Machine: machine, Trees: []report.HistoryTree{}}
	trees, err := db.Trees(ctx, machine)
	if err != nil {
		return h, err
	}
	for _, w := range trees {
		t, err := historyTree(ctx, db, w)
		if err != nil {
			return h, err
		}
		h.Trees = append(h.Trees, t)
	}
	return h, nil
}

// historyTree is a machine's history on one tree: the releases in
// version order (the order measured differs when nights were missed;
// other tags where they were measured), and the incidents.
func historyTree(ctx context.Context, db *history.DB, w history.Where) (report.HistoryTree, error) {
	t := report.HistoryTree{Remote: w.Remote, Branch: w.Branch, Measurements: []report.HistoryMeasurement{}, Incidents: []report.Incident{}}
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
		t.Measurements = append(t.Measurements, measurementOf(m))
	}
	for _, i := range incs {
		t.Incidents = append(t.Incidents, *incidentOf(i))
	}
	return t, nil
}

func measurementOf(m history.Measurement) report.HistoryMeasurement {
	return report.HistoryMeasurement{Tag: m.Tag, Commit: m.Commit, Metric: m.Metric, Kind: m.Kind, Values: m.Values, Median: m.Median,
		Threshold: m.Threshold, Verdict: m.Verdict, Reason: m.Reason, Baseline: m.Baseline, MeasuredAt: m.MeasuredAt}
}

func incidentOf(i history.Incident) *report.Incident {
	return &report.Incident{ID: i.ID, LastGood: i.LastGood, FirstBad: i.FirstBadTag, Result: i.Result, Commit: i.FirstBad, Subject: i.Subject,
		StateDir: i.StateDir, ClosedTag: i.ClosedTag}
}
