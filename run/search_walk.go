package run

import (
	"context"
	"fmt"
	"time"

	"kbisect/bisect"
	"kbisect/culprit"
	"kbisect/drive"
	"kbisect/internal/commitid"
	"kbisect/lab"
	"kbisect/noise"
	"kbisect/progress"
	"kbisect/verdict"
)

// postWalk is the posterior search's walk back from a good endpoint that
// measured bad: the older releases to try, each an ancestor of the one
// before it (found once, when the walk begins or a resumed journal
// names one), and what the reports show of it.
type postWalk struct {
	listed   bool
	plan     *bisect.WalkBack
	releases []bisect.Release
	search   *lab.Search
	found    int
}

// walkOptions are drive's walk back for this run, nil when the run does
// not walk back (--find-good, the job's find_good).
func (p *posteriorRun) walkOptions(ctx context.Context) *drive.Walk {
	if !p.r.findGoodOn() {
		return nil
	}
	return &drive.Walk{
		Releases: func() int {
			n, err := p.listReleases(ctx)
			p.keep(err)
			if n > 0 {
				p.r.ev.line("the good endpoint %s measured as bad as the bad one: walking back along the releases below %s (%d to try), boot by boot",
					commitid.Short(p.r.start.Good[0]), p.walk.plan.From.Tag, n)
			}
			return n
		},
		Tried: p.triedRelease,
		Found: p.foundRelease,
		In: func(i int) (int, bool) {
			c := p.r.start.Good[0]
			if i >= 0 {
				c = p.walk.releases[i].Commit.String()
			}
			at, ok := p.index[c]
			return at, ok
		},
		Beyond: func(boots [][]float64) string {
			if p.rule.Kind != noise.Absolute {
				return ""
			}
			if _, goodIsBad := culprit.AgainstThreshold(boots, nil, p.badness([]float64{p.rule.Threshold})[0]); goodIsBad {
				return fmt.Sprintf("every boot beyond the threshold %s", noise.FormatValue(p.rule.MetricKind, p.rule.Threshold))
			}
			return ""
		},
	}
}

// listReleases plans the walk back from the good endpoint given: the
// releases below it, newest first, each an ancestor of the one before,
// at most find_good.max_kernels of them.
func (p *posteriorRun) listReleases(ctx context.Context) (int, error) {
	w := &p.walk
	if w.listed {
		return len(w.releases), nil
	}
	w.listed, w.found = true, -1
	r := p.r
	g, err := bisect.OpenGraph(ctx, string(r.job.Build.Tree))
	if err != nil {
		return 0, err
	}
	defer g.Close()
	given, rev := r.givenGood(g)
	w.search = &lab.Search{Given: given.String(), Bad: r.start.Bad}
	plan, err := g.PlanWalkBack(rev, given, r.job.FindGood.OlderSeries)
	if err != nil {
		w.search.Reason = "cannot walk back: " + err.Error()
		return 0, nil
	}
	w.plan, w.search.From = plan, plan.From.Tag
	below := given
	for _, c := range plan.Candidates {
		if len(w.releases) >= r.job.FindGood.MaxKernels {
			break
		}
		ok, err := g.IsAncestor(c.Commit, below)
		if err != nil {
			return 0, err
		}
		if !ok || c.Commit == below {
			w.search.Tried = append(w.search.Tried, lab.Try{Tag: c.Tag, Commit: c.Commit.String(), Verdict: verdict.Skip,
				Reason: "not an ancestor of " + commitid.Short(below.String()) + ": not on the way back"})
			continue
		}
		w.releases = append(w.releases, c)
		below = c.Commit
	}
	return len(w.releases), nil
}

// releaseOf is the index of a journaled release's commit on the walk.
func (p *posteriorRun) releaseOf(ctx context.Context, commit string) (int, error) {
	if _, err := p.listReleases(ctx); err != nil {
		return 0, err
	}
	for i, c := range p.walk.releases {
		if c.Commit.String() == commit {
			return i, nil
		}
	}
	return 0, fmt.Errorf("the journal names the release %s, which is not on the walk back from %s: give another --state", commitid.Short(commit), commitid.Short(p.r.start.Good[0]))
}

// triedRelease hears the walk leave or take release i.
func (p *posteriorRun) triedRelease(i int, good bool, why string) {
	rel := p.walk.releases[i]
	try := lab.Try{Tag: rel.Tag, Commit: rel.Commit.String(), Verdict: verdict.Bad, Reason: why}
	var all []float64
	for _, rec := range p.journal.Records() {
		if rec.Kind == lab.SearchRelease && rec.Commit == try.Commit {
			all = append(all, rec.Values...)
			try.Seconds += rec.Seconds
		}
	}
	if len(all) > 0 {
		try.Median, try.Kind = noise.Median(all), string(p.rule.MetricKind)
	}
	if good {
		try.Verdict = verdict.Good
	}
	s := p.walk.search
	s.Tried = append(s.Tried, try)
	s.Kernels++
	p.r.ev.line("  %s %s: %s", rel.Tag, try.Verdict, why)
}

// foundRelease makes release i the good endpoint: the run's log takes
// the range from it to the bad endpoint (a resumed run finds it there),
// and the range is listed again.
func (p *posteriorRun) foundRelease(i int) error {
	rel := p.walk.releases[i]
	s := p.walk.search
	p.walk.found = i
	s.Found, s.Good = rel.Tag, rel.Commit.String()
	s.Reason = fmt.Sprintf("%s measured good after %d kernels; the search runs from it to the bad endpoint, the walk's boots its evidence", rel.Tag, s.Kernels)
	if err := p.r.restartRange(s); err != nil {
		return err
	}
	p.good, p.stopped = s.Good, ""
	// The range is listed again: what calibration queued ahead by the
	// old one's indexes is not the new one's.
	p.rng, p.dag, p.index, p.ahead = nil, nil, map[string]int{}, nil
	return p.openRange()
}

// releaseBoot boots an older release of the walk back, journaled.
func (p *posteriorRun) releaseBoot(ctx context.Context, k drive.Kernel, more func([]float64) bool) (drive.Boot, error) {
	rel := p.walk.releases[k.Release]
	commit := rel.Commit.String()
	sub := fmt.Sprintf("walk-%d", len(p.journal.Records())+1)
	p.r.ev.sink.Emit(progress.Event{Kind: progress.Testing, Commit: commit, Subject: p.r.ev.subject(commit),
		Text: fmt.Sprintf("Walking back: measuring %s (boot %d of it)", rel.Tag, p.releaseBoots(commit)+1)})
	began := time.Now()
	ev, err := p.pipe.BootOnce(ctx, commit, sub, func(v []float64) bool { return more(p.badness(v)) })
	if err != nil {
		return drive.Boot{}, err
	}
	if len(ev.Values) > 0 && ev.Failure == nil {
		if err := lab.SaveBoot(p.r.stateDir, sub, ev); err != nil {
			return drive.Boot{}, err
		}
	}
	return p.tookRelease(commit, sub, p.pipe.Name, ev, began)
}

// releaseBoots counts the journal's boots of a release.
func (p *posteriorRun) releaseBoots(commit string) int {
	n := 0
	for _, rec := range p.journal.Records() {
		if rec.Kind == lab.SearchRelease && rec.Commit == commit {
			n++
		}
	}
	return n
}

// tookRelease journals a boot of an older release on machine, its files
// saved already (one that cannot be measured, with no values: the walk
// leaves it).
func (p *posteriorRun) tookRelease(commit, sub, machine string, ev *lab.Evidence, began time.Time) (drive.Boot, error) {
	rec := p.record(lab.SearchRelease, commit, "", ev)
	rec.Sub, rec.Machine = sub, machine
	if len(ev.Values) == 0 || ev.Failure != nil {
		rec.Values, rec.Sub, rec.Failure = nil, "", ev.Failure
		if err := p.journal.Append(rec); err != nil {
			return drive.Boot{}, err
		}
		p.r.ev.sink.Emit(progress.Event{Kind: progress.Tested, Commit: commit, Verdict: verdict.Skip, Text: ev.Reason, Elapsed: time.Since(began)})
		return drive.Boot{Skip: true, Reason: ev.Reason}, nil
	}
	if err := p.journal.Append(rec); err != nil {
		return drive.Boot{}, err
	}
	on := ""
	if machine != "" {
		on = " on " + machine
	}
	p.r.ev.sink.Emit(progress.Event{Kind: progress.Tested, Commit: commit, Verdict: verdict.Unsure, Elapsed: time.Since(began),
		Text: fmt.Sprintf("this boot%s: median %s", on, noise.FormatValue(p.rule.MetricKind, noise.Median(ev.Values)))})
	return drive.Boot{Samples: p.badness(ev.Values)}, nil
}

// walkedNowhere ends a run whose walk back found no good release (or
// that would not walk back): the calibration says so, and what to do.
func (p *posteriorRun) walkedNowhere(goodIsBad bool) {
	if p.cal == nil || !goodIsBad {
		return
	}
	c := p.cal
	c.GoodIsBad = true
	switch s := p.walk.search; {
	case !p.r.findGoodOn():
		c.Reason += "; run again with --find-good to walk back along the release tags to a good one (or give an older --good)"
	case s != nil:
		switch {
		case s.Reason != "":
		case len(p.walk.releases) >= p.r.job.FindGood.MaxKernels:
			s.Reason = fmt.Sprintf("no release measured good in %d kernels (find_good.max_kernels)", s.Kernels)
		case len(p.walk.releases) > 0:
			s.Reason = fmt.Sprintf("no release measured good down to %s", p.walk.releases[len(p.walk.releases)-1].Tag)
		default:
			s.Reason = "no older release is an ancestor of the good endpoint"
		}
		c.Search = s
		c.Reason = fmt.Sprintf("%s; walking back found no good release: %s", c.Reason, s.Reason)
	}
	p.keep(lab.WriteCalibration(p.r.stateDir, c))
}
