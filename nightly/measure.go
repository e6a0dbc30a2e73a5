package nightly

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/history"
	"kbisect/internal/commitid"
	"kbisect/lab"
	"kbisect/noise"
	"kbisect/report"
	"kbisect/run"
	"kbisect/verdict"
)

// judge measures a release and decides it:
//   - with no baseline, an absolute threshold decides it alone, and with
//     a ratio or auto one it is the baseline (good: nothing to hold it
//     against);
//   - with a stale baseline, the two are measured in alternating rounds
//     and judged together;
//   - else an absolute threshold decides it alone, and a relative one
//     against the baseline's samples; a bad one, when confirm asks, is
//     confirmed by the baseline measured again tonight.
func (n *night) judge(ctx context.Context, r bisect.Release, confirm bool) (history.Measurement, error) {
	b := n.base
	if b != nil && b.stale && r.Tag != b.tag {
		return n.alternate(ctx, r)
	}
	n.say("measuring %s (%s)", r.Tag, commitid.Short(r.Commit.String()))
	var ev *lab.Evidence
	var err error
	if lab.Relative(n.job) {
		ev, err = n.pipe.Sample(ctx, r.Commit.String(), lab.SampleCount(n.job), filepath.Join("samples", n.stamp+"-"+run.FileSafe(r.Tag)))
	} else {
		ev, err = n.pipe.Evidence(ctx, r.Commit.String())
	}
	if err != nil {
		return history.Measurement{}, fmt.Errorf("%s: %w", r.Tag, err)
	}
	cand := *ev // the pipeline keeps its own
	switch {
	case len(cand.Values) == 0:
		if cand.Verdict == "" {
			cand.Verdict = verdict.Skip
		}
		return n.record(ctx, r.Tag, &cand, "")
	case b == nil && lab.Relative(n.job):
		cand.Verdict = verdict.Good
		cand.Reason = fmt.Sprintf("the baseline, median %s: the %s threshold judges the next releases against its samples",
			noise.FormatValue(cand.Kind, noise.Median(cand.Values)), n.job.Verdict.Threshold)
		return n.record(ctx, r.Tag, &cand, "")
	case b == nil:
		return n.record(ctx, r.Tag, &cand, "")
	}
	against := ""
	if lab.Relative(n.job) {
		base := &lab.Evidence{Commit: b.commit, Values: b.values, Kind: cand.Kind, Metric: cand.Metric}
		c, err := lab.JudgeBeside(n.job, base, &cand, b.tag, r.Tag)
		if err != nil {
			return history.Measurement{}, err
		}
		_, _, cand.Verdict, cand.Reason = pairVerdicts(n.job, c)
		against = b.tag
	}
	if !confirm || cand.Verdict != verdict.Bad || b.tonight {
		return n.record(ctx, r.Tag, &cand, against)
	}
	n.say("%s measures bad against %s, measured %s: %s is measured again tonight before this is called a regression",
		r.Tag, b.tag, b.at.Local().Format("2006-01-02 15:04"), b.tag)
	g, err := n.pipe.Sample(ctx, b.commit, lab.SampleCount(n.job), filepath.Join("samples", n.stamp+"-"+run.FileSafe(b.tag)))
	if err != nil {
		return history.Measurement{}, fmt.Errorf("%s: %w", b.tag, err)
	}
	if len(g.Values) == 0 {
		// A release that measured good and no longer builds or boots
		// (a new compiler, a lab change) cannot confirm anything: the
		// release stands as judged, and says so.
		cand.Reason += fmt.Sprintf("; the baseline %s could not be measured again: %s", b.tag, g.Reason)
		n.say("%s could not be measured again (%s): %s stands as judged", b.tag, g.Reason, r.Tag)
		return n.record(ctx, r.Tag, &cand, against)
	}
	again := *ev
	c, err := n.pipe.JudgeTonight(ctx, g, &again, b.tag, r.Tag)
	if err != nil {
		return history.Measurement{}, err
	}
	return n.recordPair(ctx, c, r.Tag, "after it measured bad")
}

// alternate measures the baseline again beside a release, in alternating
// rounds (baseline first, each round a fresh boot), and judges the two
// on all their samples. A baseline that no longer builds or boots is
// left: the release is judged as if the baseline were fresh.
func (n *night) alternate(ctx context.Context, r bisect.Release) (history.Measurement, error) {
	b := n.base
	rounds := max(1, n.job.Nightly.Rounds)
	per := (lab.SampleCount(n.job) + rounds - 1) / rounds
	n.say("measuring %s beside %s in %d alternating rounds of %d samples: %s", r.Tag, b.tag, rounds, per, b.why)
	plan := lab.ABPlan{A: b.commit, B: r.Commit.String(), ALabel: b.tag, BLabel: r.Tag, Rounds: rounds, Samples: per,
		Name: filepath.Join("beside", n.stamp+"-"+run.FileSafe(b.tag)+".."+run.FileSafe(r.Tag))}
	res, err := n.pipe.AB(ctx, plan)
	var re *lab.RoundError
	switch {
	case errors.As(err, &re) && re.Side == "b":
		ev := *re.Evidence
		if ev.Verdict == "" || ev.Verdict == verdict.Good {
			ev.Verdict = verdict.Skip
		}
		return n.record(ctx, r.Tag, &ev, "")
	case errors.As(err, &re):
		n.say("the baseline %s could not be measured again (%s): %s is judged against its measurement of %s", b.tag, re.Evidence.Reason,
			r.Tag, b.at.Local().Format("2006-01-02"))
		b.stale, b.tonight = false, true // nothing better tonight
		return n.judge(ctx, r, false)
	case err != nil:
		return history.Measurement{}, err
	}
	c, err := n.pipe.JudgeTonight(ctx, res.Pooled("a"), res.Pooled("b"), b.tag, r.Tag)
	if err != nil {
		return history.Measurement{}, err
	}
	return n.recordPair(ctx, c, r.Tag, fmt.Sprintf("%d alternating rounds", rounds))
}

// recordPair records a baseline and a release judged beside each other,
// the baseline first: when it is good it is the baseline again (fresh
// for the rest of the night), unless the release is good too and takes
// its place.
func (n *night) recordPair(ctx context.Context, c *lab.Calibration, tag, how string) (history.Measurement, error) {
	b := n.base
	baseV, baseWhy, relV, relWhy := pairVerdicts(n.job, c)
	rel, base := *c.Bad, *c.Good
	rel.Verdict, rel.Reason = relV, relWhy
	base.Verdict, base.Reason = baseV, fmt.Sprintf("measured again beside %s (%s): %s", tag, how, baseWhy)
	if relV == verdict.Drift {
		rel.Reason = fmt.Sprintf("%s, measured good on %s, is bad now beside %s (%s): %s: median %s, was %s; %s: %s",
			b.tag, b.at.Local().Format("2006-01-02"), tag, how, b.tag, noise.FormatValue(base.Kind, noise.Median(base.Values)),
			noise.FormatValue(base.Kind, noise.Median(b.values)), tag, relWhy)
	}
	if _, err := n.record(ctx, b.tag, &base, ""); err != nil {
		return history.Measurement{}, err
	}
	if baseV == verdict.Good {
		b.values, b.at, b.stale, b.tonight = base.Values, time.Now(), false, true
	}
	return n.record(ctx, tag, &rel, b.tag)
}

// record writes a release's measurement, as judged, to the history.
func (n *night) record(ctx context.Context, tag string, ev *lab.Evidence, against string) (history.Measurement, error) {
	m := history.Measurement{Tag: tag, Commit: ev.Commit, Release: ev.Release, Signature: ev.Signature, Metric: ev.Metric, Kind: ev.Kind,
		Values: ev.Values, Verdict: ev.Verdict, Reason: ev.Reason, Baseline: against, Night: n.start.UTC().Format(time.RFC3339),
		MeasuredAt: time.Now(), StateDir: n.pipe.StateDir}
	if m.Values == nil {
		m.Values = []float64{}
	}
	if m.Metric == "" {
		m.Metric = n.job.Verdict.Metric
	}
	if len(m.Values) > 0 {
		m.Median = noise.Median(m.Values)
	}
	if ev.Decision != nil {
		m.Median, m.Threshold = ev.Decision.Median, ev.Decision.Threshold
	}
	if len(ev.Samples) > 0 {
		m.CPUs = cpuValues(report.MedianSample(ev), n.job.Verdict.Metric)
	}
	if _, err := n.db.AddMeasurement(ctx, n.where, m); err != nil {
		return m, err
	}
	n.say("%s: %s: %s", tag, m.Verdict, m.Reason)
	n.rows = append(n.rows, m)
	n.res.Measured = append(n.res.Measured, Measured{Tag: m.Tag, Commit: m.Commit, Verdict: m.Verdict, Median: m.Median, Reason: m.Reason,
		Baseline: against})
	return m, nil
}

// cpuValues are a sample's per-CPU values of the metric.
func cpuValues(m *noise.Measurement, metric string) []history.CPUValue {
	vals, err := m.MetricValues(metric)
	if err != nil || len(vals) != len(m.CPUs) {
		return nil
	}
	out := make([]history.CPUValue, len(vals))
	for i, v := range vals {
		out[i] = history.CPUValue{CPU: m.CPUs[i].CPU, Name: metric, Value: v}
	}
	return out
}

// setupPipeline makes the pipeline that measures the tags, in the
// nightly directory: what it measures is kept there (a release judged
// alone by an absolute threshold is not measured twice; samples taken
// to judge beside a baseline are named by the night).
func (n *night) setupPipeline(ctx context.Context) error {
	job := n.job
	// The lab is checked before the first build, as kbisect run does.
	rd, err := lab.Preflight(ctx, job, lab.PreflightOptions{StateDir: n.dir})
	if err != nil {
		return err
	}
	if err := rd.Err(); err != nil {
		return err
	}
	buildLog, err := os.OpenFile(filepath.Join(n.dir, "build.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	log := n.o.Log
	if log == nil {
		log = io.Discard
	}
	bo := lab.BuildOptions(job, buildLog)
	if bo.Base, err = lab.BaseConfig(ctx, job, log); err != nil {
		buildLog.Close()
		return err
	}
	n.pipe = &lab.Pipeline{Job: job, Build: bo, StateDir: filepath.Join(n.dir, "tags"), Progress: n.o.Progress}
	var q *lab.QEMULab
	if job.Boot.Method == configs.BootQEMU {
		if q, err = lab.NewQEMULab(job, n.dir, n.o.Progress); err != nil {
			buildLog.Close()
			return err
		}
		n.pipe.Boot = q.Boot
	}
	n.closePipe = func() {
		if q != nil {
			q.Close()
		}
		buildLog.Close()
	}
	r, err := lab.Rule(job, nil, nil)
	if err != nil {
		return err
	}
	n.pipe.SetRule(r)
	return nil
}
