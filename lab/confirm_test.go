package lab

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/internal/simlab"
)

// misled by one wrong verdict can name a commit that changes only
// documentation. Measured again with its parent, it is not confirmed, and
// the result says why: the binary is its parent's, and the parent is bad.
func TestAConfirmationSaysWhenTheFirstBadCommitIsNotItsCode(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 11, Commits: 120, DocPercent: 40})
	ctx := context.Background()
	if _, err := r.pipe.Calibrate(ctx, r.lab.Tree.GoodCommit, r.lab.Tree.BadCommit); err != nil {
		t.Fatal(err)
	}
	var doc, parent string
	for _, d := range r.lab.Tree.DocOnly {
		parents, err := r.g.Parents(plumbing.NewHash(d))
		if err == nil && len(parents) == 1 && r.lab.Tree.IsBad(d) && r.lab.Tree.IsBad(parents[0].String()) && r.lab.Tree.Builds(parents[0].String()) {
			doc, parent = d, parents[0].String()
			break
		}
	}
	if doc == "" {
		t.Fatal("the tree has no documentation-only commit after the regression")
	}
	c, err := r.pipe.Confirm(ctx, doc, []string{parent}, r.lab.Tree.BadCommit)
	if err != nil {
		t.Fatal(err)
	}
	if c.Confirmed || c.Culprit.Verdict != "bad" || c.Parent.Verdict != "bad" {
		t.Errorf("confirmed %v: culprit %s, parent %s", c.Confirmed, c.Culprit.Verdict, c.Parent.Verdict)
	}
	want := []string{"does not change the kernel binary", "its parent " + parent[:12] + " is bad, not good",
		"against its parent: no significant difference"}
	if c.WithParent == nil || len(c.WithParent.Rounds) != 2*ConfirmRounds {
		t.Fatalf("confirmation A/B with the parent: %+v", c)
	}
	if c.Reverted != nil {
		want = append(want, "the bad endpoint with it reverted: no significant difference")
	} else {
		// Documentation commits of the simulated tree edit the same
		// files: this one does not revert on the bad endpoint.
		want = append(want, "does not revert on the bad endpoint (revert "+doc)
	}
	for _, w := range want {
		if !slices.ContainsFunc(c.Flags, func(f string) bool { return strings.Contains(f, w) }) {
			t.Errorf("no flag says %q: %q", w, c.Flags)
		}
	}
	// Kept: a new process answers from the state directory.
	again, err := ReadConfirmation(r.state)
	if err != nil || again == nil || len(again.Flags) != len(c.Flags) {
		t.Errorf("kept confirmation: %+v, %v", again, err)
	}
}
