package simulate

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
)

// A drawn history has the shape asked for: merges of topic branches into
// a mainline whose tip (the bad endpoint) contains every commit, about
// the share of merges, broken builds and reverts that do not apply, and a
// culprit that builds and is no merge.
func TestAHistoryHasItsShape(t *testing.T) {
	const n = 4000
	s := Shape{Merges: 0.1, Broken: 0.05, NoRevert: 0.2}
	h, err := newHistory(n, s, 123, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if h.dag.Len() != n || h.dag.IsChain() {
		t.Fatalf("%d commits, a chain %v", h.dag.Len(), h.dag.IsChain())
	}
	merges, norevert := 0, 0
	for c := 0; c < n; c++ {
		if len(h.dag.Parents(c)) > 1 {
			merges++
		}
		if !h.reverts(c) {
			norevert++
		}
		if !h.dag.IsAncestor(c, n-1) {
			t.Fatalf("commit %d is not in the bad endpoint", c)
		}
	}
	// A mainline step is a merge with a topic of 1-8 commits (4.5 on
	// average) a tenth of the time: 0.1 / (0.9 + 0.1·5.5) ≈ 0.069 of the
	// commits are merges.
	for _, c := range []struct {
		what   string
		got    int
		lo, hi float64
	}{{"merges", merges, 0.06, 0.078}, {"broken", len(h.broken), 0.04, 0.06}, {"no revert", norevert, 0.18, 0.22}} {
		if share := float64(c.got) / n; share < c.lo || share > c.hi {
			t.Errorf("%s: %.3f of the commits, want %.2f to %.2f", c.what, share, c.lo, c.hi)
		}
	}
	if h.culprit != 123 && (!h.broken[123] && len(h.dag.Parents(123)) < 2) {
		t.Errorf("culprit %d, want the pick 123 (it builds and is no merge)", h.culprit)
	}
	if h.broken[h.culprit] || len(h.dag.Parents(h.culprit)) > 1 || !h.bad(n-1) || h.bad(-1) || !h.bad(h.culprit) {
		t.Errorf("culprit %d: broken %v, parents %v", h.culprit, h.broken[h.culprit], h.dag.Parents(h.culprit))
	}
	for c := 0; c < n; c++ {
		if h.bad(c) != h.dag.IsAncestor(h.culprit, c) {
			t.Fatalf("commit %d: bad %v", c, h.bad(c))
		}
	}
}

// On a range with merges, broken builds and reverts that do not apply,
// the engine names the right commit or says it cannot; the shape is
// kbisect's engine's alone.
func TestTheEngineBisectsAShapedRange(t *testing.T) {
	cfg := Config{Commits: 512, Runs: 30, Seed: 5, Good: 7000, Bad: 15000, Noise: mustNoise(t, "spread=0.2,spikes=5%:2-20x"),
		Shape: Shape{Merges: 0.15, Broken: 0.05, NoRevert: 0.3}}
	res, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Strategies) != 1 || res.Strategies[0].Name != "kbisect" || res.Merges != 0.15 {
		t.Fatalf("%+v", res)
	}
	if k := res.Strategies[0]; k.WrongFound != 0 || k.Right < 25 {
		t.Errorf("kbisect: %+v", k)
	}
	cfg.Strategies = []string{"kbisect", "rule"}
	if _, err := Run(context.Background(), cfg, nil); err == nil || !strings.Contains(err.Error(), "only kbisect's engine") {
		t.Errorf("the rule on a shaped range: %v", err)
	}
}
