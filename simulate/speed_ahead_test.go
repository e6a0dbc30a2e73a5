package simulate

import (
	"testing"
	"time"
)

// speedKernel names a kernel of a trace: a commit, or the bad endpoint
// with it reverted.
type speedKernel struct {
	commit   int
	reverted bool
}

// speedAheadBuild is a build made ahead, on the slot's timeline.
type speedAheadBuild struct {
	k          speedKernel
	start, end time.Duration
}

// speedPriceAhead is a run's wall time on one host whose one build slot
// builds ahead, as lab.Ahead does with the posterior search: while a boot
// is measured, the kernels its record says come next build one after the
// other, from when the boot's own kernel is ready; when the next boot is
// asked for, a build ahead it no longer needs is cancelled (the slot is
// free from then) and those not started are dropped; a kernel not built
// ahead is built when its boot comes, after the build that holds the
// slot. The first build is cold, the others incremental.
func speedPriceAhead(trace []bootRecord, c speedCosts, perBoot time.Duration) time.Duration {
	var t, slot time.Duration // now; when the slot is free
	ready := map[speedKernel]time.Duration{}
	builds := 0
	cost := func() time.Duration {
		builds++
		if builds == 1 {
			return c.cold
		}
		return c.incremental
	}
	var pending []speedAheadBuild
	for _, b := range trace {
		k := speedKernel{b.commit, b.reverted}
		keep := map[speedKernel]bool{k: true}
		for _, a := range b.ahead {
			keep[speedKernel{commit: a}] = true
		}
		for _, p := range pending {
			switch {
			case p.end <= t:
				// built: in the cache
			case p.start < t && keep[p.k]:
				// running and still wanted: it goes on
			case p.start < t:
				delete(ready, p.k) // cancelled: the slot is free now
				slot = t
			default:
				delete(ready, p.k) // queued: dropped
				slot = min(slot, max(p.start, t))
			}
		}
		pending = pending[:0]
		at, have := ready[k]
		switch {
		case have:
		case b.built:
			start := max(t, slot)
			at = start + cost()
			slot = at
			ready[k] = at
		default:
			at = t // booted before: in the cache
		}
		t = max(t, at)
		ready[k] = at
		for _, a := range b.ahead {
			ak := speedKernel{commit: a}
			if _, ok := ready[ak]; ok {
				continue // built, building or booted before
			}
			start := max(slot, at)
			end := start + cost()
			ready[ak], slot = end, end
			pending = append(pending, speedAheadBuild{k: ak, start: start, end: end})
		}
		t += perBoot + time.Duration(b.samples)*c.sample
	}
	return t
}

// A trace priced by hand: the good endpoint builds while the bad one is
// measured and is ready when its boot comes; of two kernels planned
// while commit 4 is measured, the one building when commit 6 is asked for
// is cancelled and 6, queued behind it, is dropped and built on the
// spot; 5 builds while 6 is measured and its boot waits for the rest.
func TestSpeedPriceAheadHidesThePredictedBuilds(t *testing.T) {
	m := time.Minute
	c := speedCosts{cold: 25 * m, incremental: 6 * m, kexec: 40 * time.Second, settle: 20 * time.Second, sample: m}
	trace := []bootRecord{
		{commit: 9, built: true, samples: 5, ahead: []int{-1}},
		{commit: -1, built: true, samples: 5},
		{commit: 4, built: true, samples: 3, ahead: []int{2, 6}},
		{commit: 6, built: true, samples: 3, ahead: []int{5}},
		{commit: 5, built: true, samples: 3},
	}
	// 9 cold by 25, measured until 31 while -1 builds (25–31); -1 until
	// 37; 4 built 37–43, measured until 47 while 2 builds (43–49), 6
	// queued; at 47 both go, 6 built 47–53, measured until 57 while 5
	// builds (53–59); 5 waits until 59, measured until 63.
	if got := speedPriceAhead(trace, c, c.kexec+c.settle); got != 63*m {
		t.Errorf("with builds ahead %v, want 63m", got)
	}
	if got := speedPrice(trace, c, c.kexec+c.settle); got != 73*m {
		t.Errorf("without %v, want 73m", got)
	}
	if got := speedFloor(trace, c); got != 49*m {
		t.Errorf("floor %v, want 49m", got)
	}
}
