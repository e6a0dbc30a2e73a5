package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"kbisect/bisect"
	"kbisect/noise"
)

// Confirmation is the first bad commit measured again, with its parent,
// on fresh boots and with extra samples: a culprit named by a bisection
// rests on one verdict per step, and a wrong one costs a maintainer's
// day.
type Confirmation struct {
	Culprit *Evidence `json:"culprit"`
	Parent  *Evidence `json:"parent"`
	// Comparison is of the two kernels' samples, the parent as A.
	Comparison noise.Comparison `json:"comparison"`
	// Confirmed says the culprit measured bad and its parent good again,
	// and the difference is significant.
	Confirmed bool `json:"confirmed"`
	// Flags are what a reader must know: the culprit does not change the
	// binary, is a merge, or did not measure as before.
	Flags []string `json:"flags,omitempty"`
}

func (p *Pipeline) confirmationPath() string {
	return filepath.Join(p.StateDir, "confirmation.json")
}

// Confirm measures the first bad commit and its first parent again with
// max(verdict.samples.max, 2×min) samples each. A confirmation kept in the
// state directory is returned as it is.
func (p *Pipeline) Confirm(ctx context.Context, culprit string, parents []string) (*Confirmation, error) {
	return confirm(ctx, []*Pipeline{p}, culprit, parents)
}

// confirm confirms on the pipelines of identical machines: with two, the
// culprit and its parent are measured at once.
func confirm(ctx context.Context, pipes []*Pipeline, culprit string, parents []string) (*Confirmation, error) {
	p := pipes[0]
	if err := p.init(); err != nil {
		return nil, err
	}
	if c, err := ReadConfirmation(p.StateDir); err != nil || c != nil {
		return c, err
	}
	if len(parents) == 0 {
		return nil, fmt.Errorf("confirm %s: a root commit has no parent to compare with", short(culprit))
	}
	c := &Confirmation{}
	if len(parents) > 1 {
		c.Flags = append(c.Flags, fmt.Sprintf("the first bad commit is a merge of %d parents: the change is in what it merges, compared here with its first parent %s", len(parents), short(parents[0])))
	}
	n := max(p.rule.MaxSamples, 2*p.rule.MinSamples)
	evs, err := both(ctx, pipes, [2]string{culprit, parents[0]}, n, "confirm")
	if err != nil {
		return nil, fmt.Errorf("confirming: %w", err)
	}
	c.Culprit, c.Parent = evs[0], evs[1]
	if c.Culprit.Signature != "" && c.Culprit.Signature == c.Parent.Signature {
		c.Flags = append(c.Flags, fmt.Sprintf("the first bad commit does not change the kernel binary (signature %s, as its parent's): its verdict is noise, not its code", shortSig(c.Culprit.Signature)))
	}
	c.Comparison = noise.Compare(c.Parent.Values, c.Culprit.Values, p.rule.Confidence)
	for _, side := range []struct {
		name, want string
		ev         *Evidence
	}{{"the first bad commit", string(noise.Bad), c.Culprit}, {"its parent", string(noise.Good), c.Parent}} {
		if side.ev.Verdict != side.want {
			c.Flags = append(c.Flags, fmt.Sprintf("measured again, %s %s is %s, not %s: %s", side.name, short(side.ev.Commit), side.ev.Verdict, side.want, side.ev.Reason))
		}
	}
	c.Confirmed = c.Culprit.Verdict == string(noise.Bad) && c.Parent.Verdict == string(noise.Good) && c.Comparison.Significant()
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := bisect.WriteFileAtomic(p.confirmationPath(), append(b, '\n')); err != nil {
		return nil, err
	}
	return c, nil
}
