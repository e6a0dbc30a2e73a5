package run

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"kbisect/culprit"
	"kbisect/drive"
	"kbisect/internal/commitid"
	"kbisect/lab"
	"kbisect/noise"
	"kbisect/progress"
	"kbisect/verdict"
	"kbisect/worktree"
)

// history is what the journal holds, as drive replays it: calibration's
// boots, then the search's, in the order they were measured.
func (p *posteriorRun) history() ([]drive.Record, error) {
	var hist []drive.Record
	for _, rec := range p.journal.Records() {
		switch rec.Kind {
		case lab.SearchGood, lab.SearchBad:
			k := drive.Kernel{Commit: culprit.GoodEndpoint, Why: drive.Calibrating}
			if rec.Kind == lab.SearchBad {
				k.Commit = drive.BadEndpoint
			}
			hist = append(hist, drive.Record{Kernel: k, Boot: drive.Boot{Samples: p.badness(rec.Values)}})
		case lab.SearchBoot, lab.SearchSkip:
			if err := p.openRange(); err != nil {
				return nil, err
			}
			i, ok := p.index[rec.Commit]
			if rec.Commit == p.r.start.Good[0] && !rec.Reverted {
				i, ok = culprit.GoodEndpoint, true // a boot that followed the machine's drift
			}
			if !ok {
				return nil, fmt.Errorf("the journal names %s, which is not in the range: give another --state", commitid.Short(rec.Commit))
			}
			if rec.Reverted && rec.Built != "" {
				p.reverts[i] = rec.Built
			}
			k := drive.Kernel{Commit: i, Reverted: rec.Reverted, Why: drive.Searching}
			switch {
			case rec.Confirming:
				k.Why = drive.Confirming
			case i == culprit.GoodEndpoint || (i == len(p.rng.Commits)-1 && !rec.Reverted):
				k.Why = drive.Following
			}
			hist = append(hist, drive.Record{Kernel: k, Boot: drive.Boot{Samples: p.badness(rec.Values), Skip: rec.Kind == lab.SearchSkip, Reason: rec.Reason}})
		}
	}
	return hist, nil
}

// Boot is one commit on this lab (drive.Machine): a calibration boot of
// an endpoint, or what the search asks for, measured once and journaled
// before the search takes it in.
func (p *posteriorRun) Boot(ctx context.Context, k drive.Kernel, more func([]float64) bool) (drive.Boot, error) {
	if p.hookErr != nil {
		return drive.Boot{}, p.hookErr
	}
	if k.Why == drive.Calibrating {
		return p.calibrationBoot(ctx, k, more)
	}
	return p.boot(ctx, culprit.Step{Kind: culprit.Measure, Commit: k.Commit, Reverted: k.Reverted, Confirming: k.Why == drive.Confirming}, more)
}

// boot measures what the step asks for, once, and journals it.
func (p *posteriorRun) boot(ctx context.Context, step culprit.Step, more func([]float64) bool) (drive.Boot, error) {
	r := p.r
	commit := p.r.start.Good[0]
	if step.Commit != culprit.GoodEndpoint {
		commit = p.rng.Commits[step.Commit].String()
	}
	built := commit
	if step.Reverted {
		var err error
		if built, err = p.reverted(ctx, step.Commit); err != nil {
			var ce *worktree.ConflictError
			if !errors.As(err, &ce) {
				return drive.Boot{}, err
			}
			r.ev.line("%s does not revert on the bad endpoint (%v): confirming without it", commitid.Short(commit), ce)
			if err := p.journal.Append(lab.SearchRecord{Kind: lab.SearchSkip, Commit: commit, Reverted: true, Confirming: step.Confirming, Reason: ce.Error()}); err != nil {
				return drive.Boot{}, err
			}
			return drive.Boot{Skip: true, Reason: ce.Error()}, nil
		}
	}
	lead := p.search.Leading(1)[0]
	what := fmt.Sprintf("boot %d of this commit", p.search.BootsOf(step.Commit)+1)
	if step.Commit == culprit.GoodEndpoint {
		what = fmt.Sprintf("the good endpoint again (boot %d of it), to follow the machine", p.search.BootsOf(step.Commit)+len(p.goods)+1)
	}
	if step.Reverted {
		what = fmt.Sprintf("the bad endpoint with %s reverted", commitid.Short(commit))
	}
	if step.Confirming {
		what += ", confirming"
	}
	fc := p.forecast
	r.ev.sink.Emit(progress.Event{Kind: progress.Testing, Commit: built, Subject: r.ev.subject(commit),
		Text: fmt.Sprintf("Measuring %s (%d boots so far; leading: %s at %s)", what, p.search.Boots(), commitid.Short(p.rng.Commits[lead.Commit].String()), culprit.Format(lead.Probability)),
		Step: progress.Step{Boots: p.search.Boots(), Probability: lead.Probability, Forecast: progress.Forecast{Boots: fc.Boots, BootsLow: fc.BootsLow, BootsHigh: fc.BootsHigh,
			Seconds: fc.Seconds, SecondsLow: fc.SecondsLow, SecondsHigh: fc.SecondsHigh}}})
	p.planAhead(ctx, built, step)
	began := time.Now()
	sub := fmt.Sprintf("boot-%d", p.search.Boots()+1)
	ev, err := p.pipe.BootOnce(ctx, built, sub, func(v []float64) bool {
		return more(p.badness(v))
	})
	if err != nil {
		return drive.Boot{}, err
	}
	if len(ev.Values) > 0 {
		if err := lab.SaveBoot(r.stateDir, sub, ev); err != nil {
			return drive.Boot{}, err
		}
	}
	if len(ev.Values) == 0 || ev.Failure != nil {
		// A kernel that failed after some samples (it hung the host
		// twice in the middle of the workload) is a failure, not a boot
		// measured by its first samples.
		if err := p.journal.Append(lab.SearchRecord{Kind: lab.SearchSkip, Commit: commit, Reverted: step.Reverted, Confirming: step.Confirming, Built: built, Reason: ev.Reason, Failure: ev.Failure, Seconds: ev.Seconds}); err != nil {
			return drive.Boot{}, err
		}
		r.ev.sink.Emit(progress.Event{Kind: progress.Tested, Commit: built, Verdict: verdict.Skip, Text: ev.Reason, Elapsed: time.Since(began)})
		return drive.Boot{Skip: true, Reason: ev.Reason}, nil
	}
	rec := p.record(lab.SearchBoot, commit, builtIf(step.Reverted, built), ev)
	rec.Reverted, rec.Confirming, rec.Sub = step.Reverted, step.Confirming, sub
	if err := p.journal.Append(rec); err != nil {
		return drive.Boot{}, err
	}
	samples := p.badness(ev.Values)
	lam := p.search.Evidence(samples)
	v, side := verdict.Good, "good"
	if lam > 0 {
		v, side = verdict.Bad, "bad"
	}
	r.ev.sink.Emit(progress.Event{Kind: progress.Tested, Commit: built, Verdict: v, Elapsed: time.Since(began),
		Text: fmt.Sprintf("this boot: median %s, %.0f:1 for %s", noise.FormatValue(p.rule.MetricKind, noise.Median(ev.Values)), math.Exp(math.Abs(lam)), side)})
	return drive.Boot{Samples: samples}, nil
}
