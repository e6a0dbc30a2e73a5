package lab

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"kbisect/internal/simlab"
	"kbisect/worktree"
)

// TestABSeesTheRegressionGoneWhenItIsReverted: the bad endpoint against
// the same kernel with the planted regression reverted, in alternating
// rounds on fresh boots: B is far less noisy, significantly, on every
// isolated CPU; every round is kept, and a second run measures nothing.
func TestABSeesTheRegressionGoneWhenItIsReverted(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 3, Commits: 120})
	ctx := context.Background()
	reverted, err := worktree.Derive(ctx, r.lab.Tree.Dir, r.lab.Tree.BadCommit, worktree.Change{Revert: r.lab.Tree.Regression})
	if err != nil {
		t.Fatal(err)
	}
	plan := ABPlan{A: r.lab.Tree.BadCommit, B: reverted, ALabel: "bad", BLabel: "bad with the regression reverted", Rounds: 4, Samples: 2}
	res, err := r.pipe.AB(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rounds) != 8 || res.Rounds[0].Side != "a" || res.Rounds[1].Side != "b" || res.Rounds[7].Round != 4 {
		t.Fatalf("rounds: %+v", res.Rounds)
	}
	boots := map[string]bool{}
	for _, round := range res.Rounds {
		if len(round.Evidence.Boots) != 1 || len(round.Evidence.Values) != 2 {
			t.Errorf("round %d %s: %d boots, %d samples", round.Round, round.Side, len(round.Evidence.Boots), len(round.Evidence.Values))
			continue
		}
		boots[round.Evidence.Boots[0].BootID] = true
	}
	if len(boots) != 8 {
		t.Errorf("%d distinct boots for 8 rounds", len(boots))
	}
	if rep := res.Report; rep.Per != "boot" || rep.Comparison.NA != 4 || rep.Comparison.NB != 4 {
		t.Errorf("compared per %s, %d vs %d", rep.Per, rep.Comparison.NA, rep.Comparison.NB)
	}
	rep := res.Report
	if !rep.Comparison.Significant() || !strings.HasPrefix(rep.Conclusion, "B is ") || !strings.Contains(rep.Conclusion, "less noisy than A on all 32 CPUs") {
		t.Errorf("conclusion: %s", rep.Conclusion)
	}
	if rep.B.Median >= rep.A.Median/100 {
		t.Errorf("medians: A %v, B %v", rep.A.Median, rep.B.Median)
	}
	hostBoots := len(r.lab.Host.Boots())
	again, err := r.pipeline().AB(ctx, plan)
	if err != nil || again.Report.Conclusion != rep.Conclusion || len(r.lab.Host.Boots()) != hostBoots {
		t.Errorf("again: %v, %d boots more", err, len(r.lab.Host.Boots())-hostBoots)
	}
}

// TestABOfTwoIdenticalKernelsFindsNoDifference: the same kernel on both
// sides is "no significant difference".
func TestABOfTwoIdenticalKernelsFindsNoDifference(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 4, Commits: 120})
	plan := ABPlan{A: r.lab.Tree.GoodCommit, B: r.lab.Tree.GoodCommit, ALabel: "good", BLabel: "good again", Rounds: 3, Samples: 3}
	res, err := r.pipe.AB(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	if res.Report.Comparison.Significant() || !strings.HasPrefix(res.Report.Conclusion, "no significant difference") {
		t.Errorf("identical kernels: %s", res.Report.Conclusion)
	}
}

// TestABSweepOfIdenticalKernels runs KBISECT_AB_SWEEP comparisons of a
// kernel with itself on the simulated lab (5 rounds of 3 samples, the
// defaults) and counts how many call them different: at most one in
// twenty. Outside the default suite (about 3 s a comparison).
func TestABSweepOfIdenticalKernels(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("KBISECT_AB_SWEEP"))
	if n == 0 {
		t.Skip("set KBISECT_AB_SWEEP=N to run N comparisons")
	}
	r := newSimRun(t, simlab.Options{Seed: 4, Commits: 80})
	differ := 0
	for i := 0; i < n; i++ {
		r.lab.Host.SetSeed(uint64(1000 + i))
		p := r.pipeline()
		p.StateDir = t.TempDir()
		res, err := p.AB(context.Background(), ABPlan{A: r.lab.Tree.GoodCommit, B: r.lab.Tree.GoodCommit, Rounds: 5, Samples: 3})
		if err != nil {
			t.Fatal(err)
		}
		if res.Report.Comparison.Significant() {
			differ++
			t.Logf("run %d: %s", i, res.Report.Conclusion)
		}
	}
	t.Logf("identical kernels called different in %d of %d comparisons (%.1f%%)", differ, n, 100*float64(differ)/float64(n))
	if float64(differ) > 0.05*float64(n) {
		t.Errorf("identical kernels called different in %d of %d comparisons", differ, n)
	}
}
