package run

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
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
		m, err := p.machineOf(rec)
		if err != nil {
			return nil, err
		}
		switch rec.Kind {
		case lab.SearchGood, lab.SearchBad:
			k := drive.Kernel{Commit: culprit.GoodEndpoint, Why: drive.Calibrating}
			if rec.Kind == lab.SearchBad {
				k.Commit = drive.BadEndpoint
			}
			hist = append(hist, drive.Record{Kernel: k, Boot: drive.Boot{Samples: p.badness(rec.Values)}, Machine: m})
		case lab.SearchRelease:
			i, err := p.releaseOf(context.Background(), rec.Commit)
			if err != nil {
				return nil, err
			}
			b := drive.Boot{Samples: p.badness(rec.Values), Skip: len(rec.Values) == 0, Reason: rec.Reason}
			hist = append(hist, drive.Record{Kernel: drive.Kernel{Commit: drive.Older, Release: i, Why: drive.WalkingBack}, Boot: b, Machine: m})
		case lab.SearchBoot, lab.SearchSkip:
			if err := p.openRange(); err != nil {
				return nil, err
			}
			i, ok := p.index[rec.Commit]
			if rec.Commit == p.good && !rec.Reverted {
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
			hist = append(hist, drive.Record{Kernel: k, Boot: drive.Boot{Samples: p.badness(rec.Values), Skip: rec.Kind == lab.SearchSkip, Reason: rec.Reason}, Machine: m})
		}
	}
	return hist, nil
}

// machineOf is the machine a journaled boot ran on, by its job's place:
// the first when the record names none (a run of one machine).
func (p *posteriorRun) machineOf(rec lab.SearchRecord) (int, error) {
	if rec.Machine == "" {
		return 0, nil
	}
	for i, j := range p.r.jobs {
		if j.Machine.Name == rec.Machine && (len(p.r.jobs) > 1 || i == 0) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%s names the machine %q, which no --job names: give the job files the run began with, or another --state", filepath.Join(p.r.stateDir, "search.jsonl"), rec.Machine)
}

// Boot is one commit on this lab (drive.Machine): a calibration boot of
// an endpoint, or what the search asks for, measured once and journaled
// before the search takes it in.
func (p *posteriorRun) Boot(ctx context.Context, k drive.Kernel, more func([]float64) bool) (drive.Boot, error) {
	if p.hookErr != nil {
		return drive.Boot{}, p.hookErr
	}
	switch k.Why {
	case drive.Calibrating:
		return p.calibrationBoot(ctx, k, more)
	case drive.WalkingBack:
		return p.releaseBoot(ctx, k, more)
	}
	return p.boot(ctx, culprit.Step{Kind: culprit.Measure, Commit: k.Commit, Reverted: k.Reverted, Confirming: k.Why == drive.Confirming}, more)
}

// boot measures what the step asks for, once, and journals it.
func (p *posteriorRun) boot(ctx context.Context, step culprit.Step, more func([]float64) bool) (drive.Boot, error) {
	commit := p.commitOf(step)
	built := commit
	if step.Reverted {
		var err error
		if built, err = p.reverted(ctx, step.Commit); err != nil {
			return p.noRevert(step, commit, err)
		}
	}
	p.announce(step, commit, built, "")
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
		if err := lab.SaveBoot(p.r.stateDir, sub, ev); err != nil {
			return drive.Boot{}, err
		}
	}
	return p.took(step, commit, built, sub, p.pipe.Name, ev, began)
}

// commitOf is the commit a step boots (the bad endpoint's, reverted).
func (p *posteriorRun) commitOf(step culprit.Step) string {
	if step.Commit == culprit.GoodEndpoint {
		return p.good
	}
	return p.rng.Commits[step.Commit].String()
}

// noRevert journals a step's revert that does not apply on the bad
// endpoint as a skip (the confirmation goes on without it); any other
// error making the revert is the run's.
func (p *posteriorRun) noRevert(step culprit.Step, commit string, err error) (drive.Boot, error) {
	var ce *worktree.ConflictError
	if !errors.As(err, &ce) {
		return drive.Boot{}, err
	}
	p.r.ev.line("%s does not revert on the bad endpoint (%v): confirming without it", commitid.Short(commit), ce)
	if err := p.journal.Append(lab.SearchRecord{Kind: lab.SearchSkip, Commit: commit, Reverted: true, Confirming: step.Confirming, Reason: ce.Error()}); err != nil {
		return drive.Boot{}, err
	}
	return drive.Boot{Skip: true, Reason: ce.Error()}, nil
}

// announce says a step's boot begins (on machine, when a run has
// several), with where the search stands and expects to end.
func (p *posteriorRun) announce(step culprit.Step, commit, built, machine string) {
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
	if machine != "" {
		what += " on " + machine
	}
	fc := p.forecast
	p.r.ev.sink.Emit(progress.Event{Kind: progress.Testing, Commit: built, Subject: p.r.ev.subject(commit),
		Text: fmt.Sprintf("Measuring %s (%d boots so far; leading: %s at %s)", what, p.search.Boots(), commitid.Short(p.rng.Commits[lead.Commit].String()), culprit.Format(lead.Probability)),
		Step: progress.Step{Boots: p.search.Boots(), Probability: lead.Probability, Forecast: progress.Forecast{Boots: fc.Boots, BootsLow: fc.BootsLow, BootsHigh: fc.BootsHigh,
			Seconds: fc.Seconds, SecondsLow: fc.SecondsLow, SecondsHigh: fc.SecondsHigh}}})
}

// took journals a step's boot on machine (its files saved already) and
// says what it measured: a skip when the kernel could not be measured.
func (p *posteriorRun) took(step culprit.Step, commit, built, sub, machine string, ev *lab.Evidence, began time.Time) (drive.Boot, error) {
	r := p.r
	if len(ev.Values) == 0 || ev.Failure != nil {
		// A kernel that failed after some samples (it hung the host
		// twice in the middle of the workload) is a failure, not a boot
		// measured by its first samples.
		if err := p.journal.Append(lab.SearchRecord{Kind: lab.SearchSkip, Commit: commit, Reverted: step.Reverted, Confirming: step.Confirming, Built: built, Reason: ev.Reason, Failure: ev.Failure, Seconds: ev.Seconds, Machine: machine}); err != nil {
			return drive.Boot{}, err
		}
		r.ev.sink.Emit(progress.Event{Kind: progress.Tested, Commit: built, Verdict: verdict.Skip, Text: ev.Reason, Elapsed: time.Since(began)})
		return drive.Boot{Skip: true, Reason: ev.Reason}, nil
	}
	rec := p.record(lab.SearchBoot, commit, builtIf(step.Reverted, built), ev)
	rec.Reverted, rec.Confirming, rec.Sub, rec.Machine = step.Reverted, step.Confirming, sub, machine
	if err := p.journal.Append(rec); err != nil {
		return drive.Boot{}, err
	}
	samples := p.badness(ev.Values)
	lam := p.search.Evidence(samples)
	v, side := verdict.Good, "good"
	if lam > 0 {
		v, side = verdict.Bad, "bad"
	}
	on := ""
	if machine != "" {
		on = " on " + machine
	}
	r.ev.sink.Emit(progress.Event{Kind: progress.Tested, Commit: built, Verdict: v, Elapsed: time.Since(began),
		Text: fmt.Sprintf("this boot%s: median %s, %.0f:1 for %s", on, noise.FormatValue(p.rule.MetricKind, noise.Median(ev.Values)), math.Exp(math.Abs(lam)), side)})
	return drive.Boot{Samples: samples}, nil
}
