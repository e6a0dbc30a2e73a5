package nightly

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/history"
	"kbisect/internal/usage"
	"kbisect/lab"
	"kbisect/progress"
	"kbisect/run"
	"kbisect/verdict"
)

// night is one nightly run for one machine.
type night struct {
	o         Options
	job       *configs.Job
	dir       string // <git-dir>/kbisect/nightly-<machine>
	db        *history.DB
	where     history.Where
	pipe      *lab.Pipeline
	closePipe func()
	start     time.Time
	stamp     string // the night's start, for the names of what it measures
	base      *baseline
	rows      []history.Measurement // what this night measured
	unlock    func()                // the machine's lock, held until the reports are written
	res       *Result
}

// Run runs one night for the machine of o.Job and returns its answer,
// also when the night fails (its Result then aborted, unless the answer
// was known before it failed). The night's reports are written before it
// returns; one that cannot be written is said, and fails a night that
// was all well.
func Run(ctx context.Context, o Options) (*Result, error) {
	n := &night{o: o, job: o.Job, start: time.Now(), res: &Result{Machine: o.Job.Machine.Name}}
	n.stamp = n.start.UTC().Format("20060102T150405Z")
	defer n.close()
	err := n.run(ctx)
	if err != nil && n.res.Result == "" {
		n.res.Result = Aborted
	}
	if n.db != nil && !usage.Is(err) {
		files, rerr := n.writeReports(context.WithoutCancel(ctx), err)
		if rerr != nil {
			n.say("writing the night's reports: %v", rerr)
			if err == nil && n.res.Result.quiet() {
				err = rerr
			}
		} else if len(files) > 0 {
			n.say("reports: %s", strings.Join(files, " "))
		}
	}
	if err != nil {
		n.res.Error = err.Error()
	}
	return n.res, err
}

func (n *night) close() {
	if n.closePipe != nil {
		n.closePipe()
	}
	if n.db != nil {
		n.db.Close()
	}
	if n.unlock != nil {
		n.unlock()
	}
}

func (n *night) say(format string, args ...any) {
	if n.o.Progress != nil {
		progress.Linef(n.o.Progress, format, args...)
	}
}

func (n *night) run(ctx context.Context) error {
	o, job := n.o, n.job
	tree := string(job.Build.Tree)
	n.dir = filepath.Join(o.GitDir, "kbisect", "nightly-"+run.FileSafe(job.Machine.Name))
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	var err error
	if n.unlock, err = lockNightly(n.dir); err != nil {
		return err
	}
	if n.db, err = history.Open(ctx, o.DB); err != nil {
		return err
	}
	remote := remoteName(o.Remote)
	n.where = history.Where{Machine: job.Machine.Name, Remote: remote, Branch: o.Branch}

	n.say("fetching %s%s into %s", remote, map[bool]string{true: " " + o.Branch, false: ""}[o.Branch != ""], tree)
	fetchFrom := o.Remote
	if strings.HasPrefix(remote, "/") {
		fetchFrom = remote // git -C would read a relative path from the tree
	}
	head, err := fetchReleases(ctx, fetchRequest{tree: tree, gitDir: o.GitDir, remote: fetchFrom, branch: o.Branch})
	if err != nil {
		return err
	}
	g, err := bisect.OpenGraph(ctx, tree)
	if err != nil {
		return err
	}
	defer g.Close()
	tags, err := followedReleases(g, o.Tags, head)
	if err != nil {
		return err
	}
	past, err := n.db.Measurements(ctx, n.where)
	if err != nil {
		return err
	}
	incidents, err := n.db.Incidents(ctx, n.where)
	if err != nil {
		return err
	}
	opened := openIncidents(incidents)
	var open *history.Incident
	if len(opened) > 0 {
		open = opened[len(opened)-1]
	}
	n.base = baselineOf(past, job.Verdict.Metric, job.Nightly.BaselineMaxAge.D(), n.start)
	p := planNight(tags, past, open, n.base)
	switch {
	case p.resume != nil:
		n.say("the bisection of the regression since %s did not end: resuming it (state %s)", open.FirstBadTag, open.StateDir)
		return n.finishIncident(ctx, g, open)
	case p.bad != "":
		n.say("%s measured bad and no incident was opened for it (a night stopped midway): opening it", p.bad)
		return n.openIncident(ctx, g, p.good, p.bad)
	case len(p.fresh) == 0:
		n.res.Result, n.res.Message = NothingNew, fmt.Sprintf("%s: no release tag newer than the last measured one", job.Machine.Name)
		return nil
	case p.retry:
		n.say("%s has no verdict yet (the last night measured it beside %s, and could not judge it): measuring it again", p.fresh[0].Tag, n.base.tag)
	default:
		n.say("%d new release tag(s): %s", len(p.fresh), strings.Join(tagNames(p.fresh), " "))
	}
	if err := n.setupPipeline(ctx); err != nil {
		return err
	}
	j := newJudging(p.fresh, open != nil, n.base)
	st := j.next()
	for st.kind == stepMeasure {
		walking := j.walking
		m, err := n.judge(ctx, st.release, j.confirm())
		if err != nil {
			return err
		}
		st = j.judged(m)
		if !walking && !judged(m.Verdict) && m.Verdict != verdict.Drift {
			n.say("%s could not be judged (%s): the next older release is measured", m.Tag, m.Reason)
		}
	}
	return n.end(ctx, g, st, opened, open)
}

// end ends a night on the step its judging came to.
func (n *night) end(ctx context.Context, g *bisect.Graph, st step, opened []*history.Incident, open *history.Incident) error {
	machine := n.job.Machine.Name
	switch st.kind {
	case stepDrift:
		n.res.Result = Drift
		n.res.Message = fmt.Sprintf("%s: %s\nthe machine is noisier, not the kernel: check its firmware and BIOS settings, its temperature and what else runs on it; the next nights measure both again",
			machine, st.m.Reason)
	case stepGood:
		n.res.Result = NoRegression
		n.res.Message = fmt.Sprintf("%s: %s is good: %s", machine, st.m.Tag, st.m.Reason)
		for _, o := range opened {
			if err := n.db.CloseIncident(ctx, o.ID, st.m.Tag, time.Now()); err != nil {
				return err
			}
			o.ClosedTag = st.m.Tag
			n.res.Result, n.res.Incident = Fixed, incidentOf(*o)
			n.res.Message = fmt.Sprintf("%s: %s is good again: the regression since %s (%s) is fixed in %s", machine, st.m.Tag,
				o.FirstBadTag, incidentOf(*o).Culprit(), st.m.Tag)
		}
	case stepUnknown:
		n.res.Result = Unknown
		n.res.Message = fmt.Sprintf("%s: no new release could be judged (the newest: %s)", machine, n.res.Measured[0].Reason)
	case stepStillPresent:
		n.res.Result, n.res.Incident = StillPresent, incidentOf(*open)
		n.res.Message = fmt.Sprintf("%s: %s is bad: %s\nstill present since %s (%s)", machine, st.m.Tag, st.m.Reason, open.FirstBadTag,
			incidentOf(*open).Culprit())
	case stepNothingToBisect:
		n.res.Result = Regression
		n.res.Message = fmt.Sprintf("%s: %s is bad: %s; no release measured good on this machine yet, so there is nothing to bisect from",
			machine, st.m.Tag, st.m.Reason)
	case stepBisect:
		return n.openIncident(ctx, g, st.good, st.bad)
	}
	return nil
}

// openIncident records a regression between two releases and bisects it.
// The state directory is named by the range and recorded before the
// bisection starts: a night stopped in the middle resumes it.
func (n *night) openIncident(ctx context.Context, g *bisect.Graph, lastGood, firstBad string) error {
	inc := history.Incident{LastGood: lastGood, FirstBadTag: firstBad, OpenedAt: time.Now(),
		StateDir: filepath.Join(n.dir, "incident-"+run.FileSafe(lastGood)+".."+run.FileSafe(firstBad))}
	id, err := n.db.OpenIncident(ctx, n.where, inc)
	if err != nil {
		return err
	}
	inc.ID = id
	n.say("%s is bad and %s good: bisecting (state %s)", firstBad, lastGood, inc.StateDir)
	return n.finishIncident(ctx, g, &inc)
}

// finishIncident bisects an incident's range (or resumes its bisection)
// and records the answer.
func (n *night) finishIncident(ctx context.Context, g *bisect.Graph, inc *history.Incident) error {
	if n.closePipe != nil {
		n.closePipe() // a QEMU guest left running would be the bisection's noise
		n.closePipe = nil
	}
	req := BisectRequest{JobFile: n.o.JobFile, Good: inc.LastGood, Bad: inc.FirstBadTag, StateDir: inc.StateDir, ReportDir: inc.StateDir}
	res, err := n.o.Bisect(ctx, req)
	var changed *run.JobChangedError
	if errors.As(err, &changed) {
		// The job was edited while the incident was open: its verdicts
		// were made with another rule. No one is there to choose, and a
		// refusal would come back every night: keep them aside and
		// begin again with the job as it is.
		aside := fmt.Sprintf("%s.job-changed-%s", inc.StateDir, time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(inc.StateDir, aside); err != nil {
			return fmt.Errorf("keeping aside the bisection made with the job as it was: %w", err)
		}
		n.say("%s changed since the bisection of %s..%s began (%s): its boots are kept in %s, and the bisection begins again with the job as it is",
			n.o.JobFile, inc.LastGood, inc.FirstBadTag, strings.Join(changed.Changes, "; "), aside)
		res, err = n.o.Bisect(ctx, req)
	}
	if err != nil {
		return err
	}
	inc.Result, inc.FirstBad = res.Result, res.FirstBad
	if plumbing.IsHash(res.FirstBad) {
		if info, err := g.Info(ctx, plumbing.NewHash(res.FirstBad)); err == nil {
			inc.Subject = info.Subject
		}
	}
	if err := n.db.SetBisection(ctx, inc.ID, inc.Result, inc.FirstBad, inc.Subject); err != nil {
		return err
	}
	n.res.Result, n.res.Incident = Regression, incidentOf(*inc)
	n.res.Message = fmt.Sprintf("%s: a regression between %s (good) and %s (bad): %s\nreports in %s", n.job.Machine.Name, inc.LastGood,
		inc.FirstBadTag, n.res.Incident.Culprit(), inc.StateDir)
	return nil
}

func tagNames(rs []bisect.Release) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Tag)
	}
	return out
}
