package drive

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"kbisect/culprit"
)

// TestASecondSearchBelowTheParentNamesTheFirstStep: a first step to
// 9 µs at commit 80 and a later one on to 15 µs at 200 — the search
// converges on the later step, whose parent measures worse than the good
// endpoint; it searches again below that parent and names 80, with 200
// listed as the later step. Stopped by the lab at boots before and after
// the second search began and resumed from what it recorded, it asks for
// the same kernels in the same order and ends the same.
func TestASecondSearchBelowTheParentNamesTheFirstStep(t *testing.T) {
	line := func(failAt int) *lineLab {
		return &lineLab{n: 300, culprit: 80, later: 200, middle: math.Log(9000), good: math.Log(7000), bad: math.Log(15000), seed: 5, failAt: failAt}
	}
	whole := line(-1)
	res, err := Run(context.Background(), whole, options(whole, nil))
	if err != nil {
		t.Fatal(err)
	}
	end := res.End
	if end.Kind != culprit.Found || end.Commit != 80 || len(end.Later) != 1 || end.Later[0] != 200 || end.Probability < 0.99 {
		t.Fatalf("%+v: want 80 found, 200 the later step", end)
	}
	if !strings.Contains(end.Reason, "the first of two steps") || !strings.Contains(end.Reason, "searched again below that parent") {
		t.Errorf("the answer says %q", end.Reason)
	}
	// The second search began at the first boot after which nothing
	// after the later step's parent is booted (but for calibration).
	below := len(whole.booted)
	for i := len(whole.booted) - 1; i >= 0; i-- {
		if k := whole.booted[i]; k.Why != Calibrating && (k.Commit >= 200 || k.Reverted) {
			break
		}
		below = i
	}
	if below >= len(whole.booted)-4 {
		t.Fatalf("the second search took %d boots of %d: it did not search", len(whole.booted)-below, len(whole.booted))
	}
	// The first commit after the parent's boots in the second search
	// is below the parent (its search), and the bad endpoint's revert is
	// never asked of it.
	for _, k := range whole.booted[below:] {
		if k.Commit > 199 {
			t.Fatalf("the second search booted %+v, above the parent", k)
		}
	}
	for _, stop := range []int{below - 3, below, below + 1, below + 6, (below + len(whole.booted)) / 2, len(whole.booted) - 2} {
		first := line(stop)
		if _, err := Run(context.Background(), first, options(first, nil)); !errors.Is(err, errLabDown) {
			t.Fatalf("stopped at boot %d: %v, want the lab's error", stop, err)
		}
		again := line(-1)
		again.booted = append(again.booted, first.booted...)
		res2, err := Run(context.Background(), again, options(again, first.records))
		sameRun(t, stop, res, res2, err, whole.booted, again.booted)
		if len(res2.End.Later) != 1 || res2.End.Later[0] != 200 {
			t.Fatalf("resumed after %d boots: later steps %v, want [200]", stop, res2.End.Later)
		}
	}
	t.Logf("%d boots, the second search from boot %d", len(whole.booted), below)
}

// twoStepsRun bisects 300 commits whose regression goes from 7 µs to
// middle at commit 80 and on to 15 µs at 200, and says how it ended and
// after how many boots.
func twoStepsRun(t *testing.T, middle float64, seed uint64) (culprit.Step, int) {
	t.Helper()
	l := &lineLab{n: 300, culprit: 80, later: 200, middle: math.Log(middle), good: math.Log(7000), bad: math.Log(15000), seed: seed, failAt: -1}
	res, err := Run(context.Background(), l, options(l, nil))
	if err != nil {
		t.Fatal(err)
	}
	return res.End, len(l.booted)
}

// TestAFirstStepHalfTheWayIsNamed: a first step to 10 µs (half the way
// from 7 to 15 µs, in logs) at commit 80, the later one at 200. The
// search converges on either, and the kernels its confirmation boots sit
// near the middle and read bad on some boots, which fails the check of
// the model. On the later step (seeds 1, 4 and 6), its parent: the
// search goes on below the parent and names 80 (the model's levels,
// refit across both steps, drew together; the endpoints' own boots say
// the way). On the first (seeds 2, 3 and 5), the bad endpoint without it,
// which still holds the later step: 80 is named, the later step said
// beside it. Each of those six ended inconclusive before.
func TestAFirstStepHalfTheWayIsNamed(t *testing.T) {
	below, direct := 0, 0
	for seed := uint64(1); seed <= 6; seed++ {
		end, boots := twoStepsRun(t, 10000, seed)
		if end.Kind != culprit.Found || end.Commit != 80 || end.Probability < 0.99 {
			t.Errorf("seed %d: %v %d at %.4f after %d boots (%s); want 80 found", seed, end.Kind, end.Commit, end.Probability, boots, end.Reason)
		}
		switch {
		case len(end.Later) == 1 && end.Later[0] == 200:
			below++
		case len(end.Later) == 0 && strings.Contains(end.Reason, "a later step: the candidate measures"):
			direct++
		}
	}
	if below < 2 || direct < 2 {
		t.Errorf("of 6 runs, %d named the first step by a second search below the later one's parent, %d named it directly with the later step beside it; want 2 or more of each", below, direct)
	}
}

// TestAFirstStepAQuarterOfTheWayIsNotPassedOver: a first step to 8.5 µs
// (a quarter of the way from 7 to 15 µs, in logs) at commit 80, the later
// one at 200. The search converges on the later step first; its parent
// sits 21 % above the good endpoint, which a few boots of three samples
// each scatter over (their level ±12 %). The confirmation boots the
// parent and the good endpoint with more samples, and names the later
// step only once the parent sits within a step's share of the good
// endpoint by two standard errors: no run names 200, and most go on
// below the parent and name 80. Before, seeds 3 and 5 named 200 at
// 1.0000 after 35 and 49 boots, and seed 8 ended inconclusive.
func TestAFirstStepAQuarterOfTheWayIsNotPassedOver(t *testing.T) {
	first := 0
	for seed := uint64(1); seed <= 8; seed++ {
		end, boots := twoStepsRun(t, 8500, seed)
		t.Logf("seed %d: %v %d at %.4f after %d boots (%s)", seed, end.Kind, end.Commit, end.Probability, boots, end.Reason)
		switch {
		case end.Kind == culprit.Found && end.Commit == 80:
			first++
		case end.Kind == culprit.Found:
			t.Errorf("seed %d: %d found at %.4f after %d boots, want 80 or no answer (%s)", seed, end.Commit, end.Probability, boots, end.Reason)
		}
	}
	if first < 6 {
		t.Errorf("%d of 8 runs named the first step, want 6 or more", first)
	}
}
