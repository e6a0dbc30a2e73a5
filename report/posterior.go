package report

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"

	"kbisect/bisect"
	"kbisect/internal/commitid"
	"kbisect/lab"
	"kbisect/noise"
	"kbisect/verdict"
)

// searchCommit is what a posterior search measured of a commit (nil when
// it did not boot it).
func (r *Run) searchCommit(commit string) *lab.SearchCommit {
	if r.Search == nil {
		return nil
	}
	for i := range r.Search.Commits {
		if c := &r.Search.Commits[i]; c.Commit == commit && !c.Reverted {
			return c
		}
	}
	return nil
}

// searchEvidence is a searched commit as a row shows it: each boot's
// median, and the median of those.
func (r *Run) searchEvidence(commit string) *lab.Evidence {
	c := r.searchCommit(commit)
	if c == nil || r.Job == nil {
		return nil
	}
	kind := noise.KindTime
	if r.Calibration != nil {
		kind = r.Calibration.Rule.MetricKind
	}
	med := noise.Median(c.Medians)
	return &lab.Evidence{Commit: commit, Values: c.Medians, Metric: r.Job.Verdict.Metric, Kind: kind,
		Decision: &noise.Decision{Median: med, N: len(c.Medians)}}
}

// searchCell is a searched commit's numbers in the text report: the
// median of its boots' medians, the boots, and the probability it is bad.
func (r *Run) searchCell(commit string) string {
	c := r.searchCommit(commit)
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%d boots, P(bad) %s", len(c.Medians), prob(c.PBad))
}

// prob writes a probability with the digits that matter: 0.997, 0.0003.
func prob(p float64) string {
	switch {
	case p >= 0.9999:
		return ">0.9999"
	case p <= 0.0001:
		return "<0.0001"
	case p >= 0.99:
		return fmt.Sprintf("%.4f", math.Floor(p*1e4)/1e4)
	}
	return fmt.Sprintf("%.3g", p)
}

// posteriorText says with what probability the answer holds, after how
// many boots, and (when it is not found) which commits lead.
func (r *Run) posteriorText() string {
	s := r.Search
	if s == nil {
		return ""
	}
	boots := fmt.Sprintf("%d boots (and %d of the endpoints, which taught the model)", s.Boots, s.CalibrationBoots) + machinesText(s.Machines)
	var shape string
	for _, w := range s.Shape {
		shape += " " + strings.ToUpper(w[:1]) + w[1:] + "."
	}
	switch r.Result.Kind {
	case bisect.Found:
		for _, l := range s.Later {
			shape += fmt.Sprintf(" It is the first of two steps: %s made it worse again later (the search converged on that one first, found its parent worse than the good endpoint, and searched again below it).", commitid.Short(l))
		}
		return fmt.Sprintf("%s is the first bad commit, probability %s after %s; confirmed on fresh boots of it, its parents and the bad endpoint without it.%s",
			commitid.Short(r.Result.FirstBad.String()), prob(s.Probability), boots, shape)
	case bisect.NotReproduced:
		if s.Result == "" {
			return ""
		}
		return fmt.Sprintf("No commit of the range is bad, probability %s after %s.", prob(s.None), boots)
	}
	var lead []string
	for _, c := range s.Candidates {
		if c.Probability < 0.001 {
			break
		}
		lead = append(lead, fmt.Sprintf("%s %s", commitid.Short(c.Commit), prob(c.Probability)))
	}
	if r.Result.Kind == "" && s.Result == "" {
		text := fmt.Sprintf("After %s, leading: %s.%s", boots, strings.Join(lead, ", "), shape)
		if f := s.Forecast; f != nil {
			text += fmt.Sprintf(" As its last step began (%s) the search expected %s.", f.At.Local().Format("15:04 MST"), f)
		}
		return text
	}
	return fmt.Sprintf("No commit reached probability %g after %s: %s. Leading: %s.%s", s.Confidence, boots, s.Reason, strings.Join(lead, ", "), shape)
}

// writeCandidates lists the leading candidates with their probabilities
// and subjects, as an inconclusive answer gives them.
func (r *Run) writeCandidates(ctx context.Context, w io.Writer) {
	fmt.Fprintln(w, "inconclusive: the evidence does not single out one commit. The first bad commit is most likely one of:")
	for _, c := range r.Search.Candidates {
		if c.Probability < 0.001 {
			break
		}
		subject := ""
		if h, ok := bisect.ParseHash(c.Commit); ok {
			if info, err := r.Graph.Info(ctx, h); err == nil {
				subject = info.Subject
			}
		}
		fmt.Fprintf(w, "%s %-8s %s\n", c.Commit, prob(c.Probability), subject)
	}
}

// resultOfSearch is a posterior search's result as its summary holds it:
// every booted commit once, good or bad where the evidence decided it.
func resultOfSearch(s *lab.SearchSummary) bisect.Result {
	res := bisect.Result{Kind: bisect.ResultKind(s.Result), Reason: s.Reason}
	for _, c := range s.Candidates {
		if h, ok := bisect.ParseHash(c.Commit); ok && (res.Kind != bisect.Found || len(res.Candidates) == 0) {
			res.Candidates = append(res.Candidates, h)
		}
	}
	if res.Kind == bisect.Found && len(res.Candidates) > 0 {
		res.FirstBad = res.Candidates[0]
	}
	for _, c := range s.Commits {
		h, ok := bisect.ParseHash(c.Commit)
		if !ok || c.Reverted || len(c.Medians) == c.Calibration {
			continue // the bad endpoint, measured at calibration only, is a row of its own
		}
		v := verdict.Unsure
		switch {
		case c.PBad >= s.Confidence:
			v = verdict.Bad
		case c.PBad <= 1-s.Confidence:
			v = verdict.Good
		}
		res.Tested = append(res.Tested, bisect.Tested{Commit: h, Verdict: v, Source: "posterior"})
	}
	return res
}

// machinesText says, for a run on several machines, how many boots each
// took and which were lost: " on 3 machines (a 14 boots, b 9, c 3, lost:
// why)".
func machinesText(ms []lab.SearchMachine) string {
	if len(ms) < 2 {
		return ""
	}
	var each []string
	for i, m := range ms {
		t := fmt.Sprintf("%s %d", m.Name, m.Boots)
		if i == 0 {
			t += " boots"
		}
		if m.Lost != "" {
			t += ", lost: " + m.Lost
		}
		each = append(each, t)
	}
	return fmt.Sprintf(" on %d machines (%s)", len(ms), strings.Join(each, "; "))
}
