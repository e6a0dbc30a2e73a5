package run

import (
	"context"
	"fmt"
	"math"

	"kbisect/culprit"
	"kbisect/drive"
	"kbisect/internal/commitid"
	"kbisect/lab"
	"kbisect/noise"
	"kbisect/verdict"
)

// calibrationBoot boots an endpoint for calibration, journaled (the
// samples drive's calibration asks for: a fixed number).
func (p *posteriorRun) calibrationBoot(ctx context.Context, k drive.Kernel, more func([]float64) bool) (drive.Boot, error) {
	kind, commit := p.endpointOf(k)
	n := len(p.bads)
	if kind == lab.SearchGood {
		n = len(p.goods)
	}
	sub := fmt.Sprintf("calibration-%d", n+1)
	ev, err := p.pipe.BootOnce(ctx, commit, sub, func(v []float64) bool { return more(p.badness(v)) })
	if err != nil {
		return drive.Boot{}, err
	}
	return p.tookEndpoint(commit, sub, p.pipe.Name, ev)
}

// endpointOf is a calibration boot's kind and commit: the good endpoint
// is an older release once the walk back found one.
func (p *posteriorRun) endpointOf(k drive.Kernel) (kind, commit string) {
	if k.Commit == culprit.GoodEndpoint {
		return p.kindOf(p.good), p.good
	}
	return lab.SearchBad, p.r.start.Bad
}

// kindOf is the journal's kind of an endpoint's boot of commit.
func (p *posteriorRun) kindOf(commit string) string {
	switch commit {
	case p.r.start.Bad:
		return lab.SearchBad
	case p.r.start.Good[0]:
		return lab.SearchGood
	}
	return lab.SearchRelease
}

// tookEndpoint saves and journals an endpoint's calibration boot of
// commit on machine; one that cannot be measured ends calibration.
func (p *posteriorRun) tookEndpoint(commit, sub, machine string, ev *lab.Evidence) (drive.Boot, error) {
	kind := p.kindOf(commit)
	if len(ev.Values) == 0 {
		on := ""
		if machine != "" {
			on = " on " + machine
		}
		return drive.Boot{}, fmt.Errorf("calibration: the %s endpoint %s cannot be measured%s: %s", kind, commitid.Short(commit), on, ev.Reason)
	}
	if err := lab.SaveBoot(p.r.stateDir, sub, ev); err != nil {
		return drive.Boot{}, err
	}
	rec := p.record(kind, commit, "", ev)
	rec.Sub, rec.Machine = sub, machine
	if err := p.journal.Append(rec); err != nil {
		return drive.Boot{}, err
	}
	samples := p.badness(ev.Values)
	if kind != lab.SearchBad {
		p.goods = append(p.goods, samples)
	} else {
		p.bads = append(p.bads, samples)
	}
	return drive.Boot{Samples: samples}, nil
}

// firstAhead queues the search's first commit to build while the rest
// of calibration is measured, as the endpoints' boots so far place it
// (the final model seldom moves it; when it does, the search still
// prefers it, built, to a neighbour that is not).
func (p *posteriorRun) firstAhead(s *culprit.Search) {
	if first := s.Next(); first.Kind == culprit.Measure && !first.Reverted {
		p.ahead = append(p.ahead, first.Commit)
		p.r.ahead.Queue(p.rng.Commits[first.Commit].String())
	}
}

// thresholdSays ends calibration, once it has its boots, as not
// reproduced when the job's absolute threshold says so: no boot of the
// bad endpoint beyond the threshold (it is not bad), or every boot of the
// good one beyond it (the regression is older than the range).
func (p *posteriorRun) thresholdSays(good, bad string) (why string, goodIsBad bool) {
	if p.rule.Kind != noise.Absolute {
		return "", false
	}
	badIsGood, goodIsBad := culprit.AgainstThreshold(p.goods, p.bads, p.badness([]float64{p.rule.Threshold})[0])
	f := func(boots [][]float64) string {
		var all []float64
		for _, b := range boots {
			all = append(all, b...)
		}
		return noise.FormatValue(p.rule.MetricKind, p.fromBadness(noise.Median(all)))
	}
	th := noise.FormatValue(p.rule.MetricKind, p.rule.Threshold)
	switch {
	case badIsGood:
		return fmt.Sprintf("the bad endpoint %s is not bad: median %s over %d boots, none beyond the threshold %s; the good endpoint %s: median %s. Check the threshold against these numbers, that the workload runs on the isolated CPUs (workload.cpus), and that the kernel booted with the machine's isolation parameters (boot.params) — the bad endpoint is never moved",
			commitid.Short(bad), f(p.bads), len(p.bads), th, commitid.Short(good), f(p.goods)), false
	case goodIsBad:
		return fmt.Sprintf("the good endpoint %s is bad too: median %s over %d boots, each beyond the threshold %s; the regression is older than it",
			commitid.Short(good), f(p.goods), len(p.goods), th), true
	}
	return "", false
}

// calibration is the endpoints' boots as the reports show calibration.
func (p *posteriorRun) calibration(good, bad string, m culprit.Model, err error) *lab.Calibration {
	c := &lab.Calibration{Rule: p.rule, Good: p.endpoint(p.kindOf(good), good), Bad: p.endpoint(lab.SearchBad, bad)}
	for _, ev := range []*lab.Evidence{c.Good, c.Bad} {
		ev.Decision = &noise.Decision{N: len(ev.Values), Median: noise.Median(ev.Values)}
	}
	f := func(y float64) string { return noise.FormatValue(p.rule.MetricKind, p.fromBadness(math.Exp(y))) }
	if err != nil {
		c.Reason = fmt.Sprintf("after %d boots of each endpoint (good %s: median %s; bad %s: median %s): %v", min(len(p.goods), len(p.bads)),
			commitid.Short(good), noise.FormatValue(p.rule.MetricKind, noise.Median(c.Good.Values)),
			commitid.Short(bad), noise.FormatValue(p.rule.MetricKind, noise.Median(c.Bad.Values)), err)
		c.Bad.Verdict, c.Good.Verdict = verdict.Unsure, verdict.Unsure
		return c
	}
	c.Reproduced = true
	c.Good.Verdict, c.Bad.Verdict = verdict.Good, verdict.Bad
	c.Reason = fmt.Sprintf("%d boots of each endpoint: good boots at %s, bad at %s; boots scatter by %.0f %% and samples within a boot by %.0f %%, %.1f boot spreads apart",
		min(len(p.goods), len(p.bads)), f(m.Good), f(m.Bad), 100*(math.Exp(m.BootSpread)-1), 100*(math.Exp(m.Spread)-1), m.Separation(p.r.job.Verdict.Samples.Min))
	c.Good.Reason, c.Bad.Reason = c.Reason, c.Reason
	return c
}

// fromBadness maps a badness back to the metric's value.
func (p *posteriorRun) fromBadness(b float64) float64 {
	switch {
	case p.rule.HigherIsBad:
		return b
	case p.rule.MetricKind == noise.KindPercent:
		return 100 - b
	}
	return 1 / b
}

// endpoint gathers an endpoint's calibration boots into one evidence.
func (p *posteriorRun) endpoint(kind, commit string) *lab.Evidence {
	ev := &lab.Evidence{Commit: commit, Metric: p.r.job.Verdict.Metric, Kind: p.rule.MetricKind}
	for _, rec := range p.journal.Records() {
		if rec.Kind == kind && rec.Commit == commit && len(rec.Values) > 0 {
			ev.Release = rec.Release
			ev.Values = append(ev.Values, rec.Values...)
			ev.Boots = append(ev.Boots, lab.BootInfo{Release: rec.Release, BootID: rec.BootID, Samples: len(rec.Values)})
			ev.Seconds += rec.Seconds
		}
	}
	return ev
}
