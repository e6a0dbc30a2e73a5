package lab

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"kbisect/internal/atomicfile"
	"kbisect/internal/commitid"
	"kbisect/noise"
	"kbisect/verdict"
	"kbisect/worktree"
)

// ConfirmRounds is how many boots each kernel of a confirmation gets:
// with 5 a side the A/B test on the boots' medians can reach p < 0.01.
const ConfirmRounds = 5

// Confirmation is the first bad commit measured again as kbisect ab
// measures: against its parent, and the bad endpoint against itself with
// the culprit reverted, each pair in alternating rounds on fresh boots. A
// culprit named by a bisection rests on one verdict per step, and a wrong
// one costs a maintainer's day.
type Confirmation struct {
	// Culprit and Parent gather the rounds of the first comparison:
	// every sample of each kernel.
	Culprit *Evidence `json:"culprit"`
	Parent  *Evidence `json:"parent"`
	// Comparison is of the culprit (B) against its parent (A).
	Comparison noise.Comparison `json:"comparison"`
	// WithParent is that comparison in full; Reverted is the bad
	// endpoint (A) against itself with the culprit reverted (B), nil
	// when the revert could not be made (Flags say why).
	WithParent *ABResult `json:"with_parent"`
	Reverted   *ABResult `json:"reverted,omitempty"`
	// Confirmed says the culprit is significantly worse than its parent,
	// measured bad while the parent measured good, and (when the revert
	// was made) the bad endpoint is significantly better without it.
	Confirmed bool `json:"confirmed"`
	// Flags are what a reader must know: the culprit does not change the
	// binary, is a merge, did not measure as before, or does not revert.
	Flags []string `json:"flags,omitempty"`
}

func (p *Pipeline) confirmationPath() string {
	return filepath.Join(p.StateDir, "confirmation.json")
}

// Confirm confirms the first bad commit (bad is the bad endpoint, where
// the culprit is reverted). A confirmation kept in the state directory is
// returned as it is; its rounds are kept one by one, so an interrupted
// confirmation goes on where it stopped.
func (p *Pipeline) Confirm(ctx context.Context, culprit string, parents []string, bad string) (*Confirmation, error) {
	return confirm(ctx, []*Pipeline{p}, culprit, parents, bad)
}

// confirm confirms on the pipelines of identical machines: with two, the
// comparison with the parent and the one with the revert run at once.
func confirm(ctx context.Context, pipes []*Pipeline, culprit string, parents []string, bad string) (*Confirmation, error) {
	p := pipes[0]
	if err := p.init(); err != nil {
		return nil, err
	}
	if c, err := ReadConfirmation(p.StateDir); err != nil || c != nil {
		return c, err
	}
	if len(parents) == 0 {
		return nil, fmt.Errorf("confirm %s: a root commit has no parent to compare with", commitid.Short(culprit))
	}
	c := &Confirmation{}
	if len(parents) > 1 {
		c.Flags = append(c.Flags, fmt.Sprintf("the first bad commit is a merge of %d parents: the change is in what it merges, compared here with its first parent %s", len(parents), commitid.Short(parents[0])))
	}
	rounds := max(p.Job.Verdict.Boots, ConfirmRounds)
	samples := max(p.rule.MinSamples, 1)
	withParent := ABPlan{Name: "confirm-parent", A: parents[0], B: culprit, ALabel: "parent " + commitid.Short(parents[0]),
		BLabel: "first bad " + commitid.Short(culprit), Rounds: rounds, Samples: samples}
	var reverted *ABPlan
	change := worktree.Change{Revert: culprit}
	if len(parents) > 1 {
		change.Mainline = 1
	}
	made, err := worktree.Derive(ctx, string(p.Job.Build.Tree), bad, change)
	var ce *worktree.ConflictError
	switch {
	case errors.As(err, &ce):
		c.Flags = append(c.Flags, fmt.Sprintf("the first bad commit does not revert on the bad endpoint (%v): not measured without it", ce))
	case err != nil:
		return nil, fmt.Errorf("confirming: %w", err)
	default:
		reverted = &ABPlan{Name: "confirm-revert", A: bad, B: made, ALabel: "bad endpoint " + commitid.Short(bad),
			BLabel: fmt.Sprintf("bad endpoint with %s reverted", commitid.Short(culprit)), Rounds: rounds, Samples: samples}
	}

	var errs [2]error
	run := func(i int, q *Pipeline, plan ABPlan, out **ABResult) {
		if errs[i] = WriteABPlan(q.StateDir, plan); errs[i] == nil {
			*out, errs[i] = q.AB(ctx, plan)
		}
	}
	if reverted != nil && len(pipes) > 1 {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); run(1, pipes[1], *reverted, &c.Reverted) }()
		run(0, p, withParent, &c.WithParent)
		wg.Wait()
	} else {
		run(0, p, withParent, &c.WithParent)
		if errs[0] == nil && reverted != nil {
			run(1, p, *reverted, &c.Reverted)
		}
	}
	if err := errors.Join(errs[0], errs[1]); err != nil {
		return nil, fmt.Errorf("confirming: %w", err)
	}

	c.Parent, c.Culprit = p.side(c.WithParent, "a"), p.side(c.WithParent, "b")
	c.Comparison = c.WithParent.Report.Comparison
	if c.Culprit.Signature != "" && c.Culprit.Signature == c.Parent.Signature {
		c.Flags = append(c.Flags, fmt.Sprintf("the first bad commit does not change the kernel binary (signature %s, as its parent's): its verdict is noise, not its code", commitid.Short(c.Culprit.Signature)))
	}
	for _, side := range []struct {
		name string
		want verdict.Verdict
		ev   *Evidence
	}{{"the first bad commit", verdict.Bad, c.Culprit}, {"its parent", verdict.Good, c.Parent}} {
		if side.ev.Verdict != side.want {
			c.Flags = append(c.Flags, fmt.Sprintf("measured again, %s %s is %s, not %s: %s", side.name, commitid.Short(side.ev.Commit), side.ev.Verdict, side.want, side.ev.Reason))
		}
	}
	worse := c.WithParent.Report.Direction == "worse"
	if !worse {
		c.Flags = append(c.Flags, "against its parent: "+c.WithParent.Report.Conclusion)
	}
	revertHelps := true
	if c.Reverted != nil {
		revertHelps = c.Reverted.Report.Direction == "better"
		if !revertHelps {
			c.Flags = append(c.Flags, "the bad endpoint with it reverted: "+c.Reverted.Report.Conclusion)
		}
	}
	c.Confirmed = worse && revertHelps && c.Culprit.Verdict == verdict.Bad && c.Parent.Verdict == verdict.Good
	if err := atomicfile.WriteJSON(p.confirmationPath(), c); err != nil {
		return nil, err
	}
	return c, nil
}

// side gathers one side's rounds into one evidence, judged by the rule on
// all its samples.
func (p *Pipeline) side(res *ABResult, side string) *Evidence {
	ev := &Evidence{}
	for _, r := range res.Rounds {
		if r.Side != side {
			continue
		}
		e := r.Evidence
		ev.Commit, ev.Release, ev.Signature, ev.Metric, ev.Kind = e.Commit, e.Release, e.Signature, e.Metric, e.Kind
		ev.Values = append(ev.Values, e.Values...)
		ev.Samples = append(ev.Samples, e.Samples...)
		ev.Boots = append(ev.Boots, e.Boots...)
		ev.Seconds += e.Seconds
	}
	rule := p.rule
	rule.MinSamples, rule.MaxSamples = 1, max(len(ev.Values), 1)
	d, err := rule.Decide(ev.Values)
	switch {
	case err != nil:
		ev.Verdict, ev.Reason = verdict.Skip, err.Error()
	default:
		setVerdict(ev, d)
	}
	return ev
}
