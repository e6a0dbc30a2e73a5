package lab

import (
	"context"
	"errors"
	"fmt"

	"kbisect/internal/commitid"
	"kbisect/noise"
	"kbisect/remote"
	"kbisect/verdict"
)

// sampling is how a commit's kernel is sampled: with which workload, under
// which rule, and how the samples are shared among the boots.
type sampling struct {
	w    noise.Workload
	art  remote.Artifact
	rule noise.Rule
	// canDecide is false when the samples are only taken: A/B rounds, and
	// a ratio or auto rule before calibration, with nothing to compare.
	canDecide bool
	boots     int
	// perBoot is every boot's share of the minimum; the last boot goes on
	// while the rule is unsure.
	perBoot int
	// more, when set, replaces the rule: one boot, sampled while more
	// says so (a noise-robust search judges the boot itself).
	more func(values []float64) bool
}

// planSampling plans a commit's samples under the pipeline's rule:
// exactly fixed of them when fixed > 0.
func (p *Pipeline) planSampling(art remote.Artifact, fixed int) (*sampling, error) {
	w, err := Workload(p.Job, nil)
	if err != nil {
		return nil, err
	}
	rule := p.rule
	if fixed > 0 {
		rule.MinSamples, rule.MaxSamples = fixed, fixed
	}
	canDecide := !p.measureOnly && (rule.Kind == noise.Absolute || (len(rule.Good) > 0 && (rule.Kind != noise.Auto || len(rule.Bad) > 0)))
	boots := max(1, p.Job.Verdict.Boots)
	return &sampling{w: w, art: art, rule: rule, canDecide: canDecide, boots: boots, perBoot: (rule.MinSamples + boots - 1) / boots}, nil
}

// measure boots the kernel as many times as the job asks and samples it,
// until the rule decides or the samples run out (fixed > 0: exactly that
// many). A connection the lab drops mid-measurement costs a boot, not the
// run: the kernel is booted again (up to Retries times) and that boot's
// share of the samples goes on where it stopped.
func (p *Pipeline) measure(ctx context.Context, ev *Evidence, art remote.Artifact, fixed int) error {
	s, err := p.planSampling(art, fixed)
	if err != nil {
		return err
	}
	return p.measureWith(ctx, ev, s)
}

// measureWith measures as s plans.
func (p *Pipeline) measureWith(ctx context.Context, ev *Evidence, s *sampling) error {
	ev.Metric, ev.Kind = p.Job.Verdict.Metric, s.rule.MetricKind
	drops, hangs := 0, 0
	for b, taken := 0, 0; b < s.boots; {
		m, facts, kerr, err := p.bootRetrying(ctx, ev.Commit, s.art)
		if err != nil {
			return p.hostLost(ctx, err)
		}
		if kerr != nil {
			reason, evidence := "does not boot: "+kerr.Reason, []string{kerr.Reason}
			if kerr.Panic != "" {
				reason += " (" + kerr.Panic + ")"
				evidence = append(evidence, kerr.Panic)
			}
			ev.fail(p.failure(p.Job.Boot.OnFailure), FailBoot, reason, evidence...)
			return nil
		}
		ev.Boots = append(ev.Boots, BootInfo{Release: facts.Release, BootID: facts.BootID, Cmdline: facts.Cmdline})
		n, over, err := p.sampleBoot(ctx, ev, s, m, b == s.boots-1, taken)
		m.Close()
		switch {
		case over:
			return nil
		case err == nil:
			b, taken = b+1, 0
			continue
		}
		var ie *remote.InfraError
		if !errors.As(err, &ie) || ctx.Err() != nil {
			return err
		}
		if hung, herr := p.hungUnder(ctx, ev.Commit); herr != nil {
			return p.hostLost(ctx, herr)
		} else if hung {
			// Once may be the lab's; twice, with the host back on its
			// own kernel after each power cycle, is the kernel's.
			hangs++
			if hangs >= hangsOfAKernel {
				ev.fail(p.failure(p.Job.Boot.OnFailure), FailHang,
					fmt.Sprintf("hangs the host: it stopped answering in the middle of the workload on %d boots of this kernel, and answered again after each power cycle", hangs), err.Error())
				return nil
			}
		}
		if drops >= p.retries() {
			return p.hostLost(ctx, err)
		}
		drops++
		wait := p.backoff() << (drops - 1)
		p.say(ev.Commit, PhaseMeasure, fmt.Sprintf("the lab dropped the measurement (%v): booting again in %s", err, wait))
		if err := p.sleep(ctx, wait); err != nil {
			return err
		}
		taken += n
	}
	d := ev.Decision
	switch {
	case s.more != nil:
		ev.Reason = fmt.Sprintf("%d samples", len(ev.Values))
	case d == nil && p.measureOnly:
		ev.Reason = fmt.Sprintf("%d samples", len(ev.Values))
	case d == nil && !s.canDecide:
		ev.Reason = fmt.Sprintf("%d samples for calibration", len(ev.Values))
	case d == nil:
		return fmt.Errorf("%s: no decision after %d samples", commitid.Short(ev.Commit), len(ev.Values))
	default:
		setVerdict(ev, *d)
	}
	return nil
}

// HostLostError is the lab's error that is its host's: it does not boot
// a kernel or answer after the retries (and a power cycle, where the job
// has one), or its host key is not the one known. A run on several
// machines goes on without it; a run on one stops. It says what Err says.
type HostLostError struct {
	// Machine is the pipeline's name ("" on a run of one machine).
	Machine string
	Err     error
}

func (e *HostLostError) Error() string { return e.Err.Error() }
func (e *HostLostError) Unwrap() error { return e.Err }

// hostLost marks the host's error as its own, unless the run was
// stopped.
func (p *Pipeline) hostLost(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &HostLostError{Machine: p.Name, Err: err}
}

// hangsOfAKernel is how many boots of one kernel must hang the host in
// the middle of the workload for the hang to be the kernel's: the first
// could be the lab's, the second comes after a power cycle proved it works.
const hangsOfAKernel = 2

// hungUnder says whether a measurement the lab dropped was a hang: the
// host no longer answers, and power-cycling it (boot.power_cycle) brought
// it back, which it did. A host that answers dropped a connection; one
// that cannot be power-cycled is left to the retries; one that does not
// come back is the lab's error.
func (p *Pipeline) hungUnder(ctx context.Context, commit string) (bool, error) {
	if p.Boot != nil {
		return false, nil // a machine of the caller's: not reached by SSH here
	}
	return p.recoverUnanswering(ctx, commit)
}

// sampleBoot lets a booted kernel settle, then samples it until the
// boot's share is taken (taken of it on boots the lab dropped before),
// or on the last boot until the rule decides, never past the rule's
// maximum. It returns the samples it took; over says the kernel cannot
// run the workload, which ends the commit's test (ev says why).
func (p *Pipeline) sampleBoot(ctx context.Context, ev *Evidence, s *sampling, m Machine, last bool, taken int) (n int, over bool, err error) {
	if err := p.sleep(ctx, p.Job.Boot.Settle.D()); err != nil {
		return 0, false, err
	}
	for s.wants(ev.Values, last, taken+n) {
		v, done, err := p.sample(ctx, ev, s.w, m, s.art)
		if done != nil {
			return n, true, nil
		}
		if err != nil {
			return n, false, err
		}
		n++
		ev.Boots[len(ev.Boots)-1].Samples++
		p.sampled(ev.Commit, len(ev.Values), noise.FormatValue(s.rule.MetricKind, v))
		if !last || !s.canDecide || s.more != nil {
			continue
		}
		d, err := s.rule.Decide(ev.Values)
		if err != nil {
			return n, false, err
		}
		ev.Decision = &d
		if !d.More {
			break
		}
	}
	return n, false, nil
}

// wants says whether a boot gives another sample: while more says so,
// else until the boot's share is taken (on the last boot, until the rule
// decides), never past the rule's maximum.
func (s *sampling) wants(values []float64, last bool, taken int) bool {
	if s.more != nil {
		return s.more(values)
	}
	return (last || taken < s.perBoot) && len(values) < s.rule.MaxSamples
}

// setVerdict gives an evidence the decision's verdict: good, bad, or skip
// when unsure (ofRule), the reason then saying so.
func setVerdict(ev *Evidence, d noise.Decision) {
	ev.Decision = &d
	ev.Verdict, ev.Reason = ofRule(d.Verdict), d.Reason
	if ev.Verdict != d.Verdict {
		ev.Reason = "unsure: " + d.Reason
		ev.Failure = &Failure{Class: FailUnsure, Evidence: []string{d.Reason}}
	}
}

// sample takes one sample on the machine and keeps its raw output. A
// sample that ran but is no evidence is taken again once; a workload the
// kernel cannot run ends the commit's test (done is its evidence).
func (p *Pipeline) sample(ctx context.Context, ev *Evidence, w noise.Workload, m Machine, art remote.Artifact) (float64, *Evidence, error) {
	var lastErr error
	for try := 0; try < 2; try++ {
		meas, raw, err := w.Measure(ctx, m)
		n := len(ev.Values) + 1
		if werr := saveRaw(ev.raw, n, try, raw); werr != nil {
			return 0, nil, werr
		}
		var se *noise.SetupError
		if errors.As(err, &se) {
			if se.Kernel {
				ev.fail(verdict.Skip, FailWorkload, "the kernel cannot run the workload: "+se.Msg, se.Msg)
				return 0, ev, nil
			}
			return 0, nil, fmt.Errorf("%s: %w", art.Release, err)
		}
		if err != nil {
			return 0, nil, fmt.Errorf("sample %d of %s: %w", n, commitid.Short(ev.Commit), err)
		}
		if err := meas.Usable(); err != nil {
			lastErr = err
			continue
		}
		v, err := SampleValue(p.Job, meas)
		if err != nil {
			return 0, nil, fmt.Errorf("sample %d of %s: %w", n, commitid.Short(ev.Commit), err)
		}
		ev.Samples = append(ev.Samples, meas)
		ev.Values = append(ev.Values, v)
		return v, nil, nil
	}
	return 0, nil, fmt.Errorf("sample %d of %s: twice no evidence: %w", len(ev.Values)+1, commitid.Short(ev.Commit), lastErr)
}
