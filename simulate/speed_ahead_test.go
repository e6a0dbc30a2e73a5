package simulate

import (
	"testing"
	"time"
)

// speedAheadBuild is a build made ahead, on its slot's timeline.
type speedAheadBuild struct {
	k          kernel
	slot       int
	start, end time.Duration
	cold       bool // the slot's first build
}

// speedPriceAhead is a run's wall time on one host whose builds run in
// slots build slots (the host's one, or a build server's), building ahead
// as lab.Ahead does with the posterior search: while a boot is measured,
// the kernels its record says come next build, from when the boot's own
// kernel is ready, each in the slot that has it first; when the next boot
// is asked for, a build ahead it no longer needs is cancelled (its slot is
// free from then) and those not started are dropped; a kernel not built
// ahead is built when its boot comes, in the slot that has it first. A
// slot's first build is cold, its others incremental; a slot is taken
// when it is free, the warm one first (as the build server does).
func speedPriceAhead(trace []bootRecord, c speedCosts, perBoot time.Duration, slots int) time.Duration {
	var t time.Duration                  // now
	free := make([]time.Duration, slots) // when each slot is free
	warm := make([]bool, slots)          // it has built a kernel
	ready := map[kernel]time.Duration{}  // built, or when it will be
	// place puts a build starting no sooner than from in the slot that
	// finishes it first.
	place := func(from time.Duration) (b speedAheadBuild) {
		b.slot = -1
		for i := range slots {
			s := max(free[i], from)
			e := s + c.incremental
			if !warm[i] {
				e = s + c.cold
			}
			if b.slot < 0 || e < b.end {
				b = speedAheadBuild{slot: i, start: s, end: e, cold: !warm[i]}
			}
		}
		free[b.slot], warm[b.slot] = b.end, true
		return b
	}
	var pending []speedAheadBuild
	for _, b := range trace {
		k := kernel{b.commit, b.reverted}
		keep := map[kernel]bool{k: true}
		for _, a := range b.ahead {
			keep[a] = true
		}
		// What was planned while the last boot was measured: built,
		// going on, or cancelled and dropped, which frees its slot.
		busy := make([]time.Duration, slots)
		for i := range slots {
			busy[i] = min(free[i], t)
		}
		for _, p := range pending {
			switch {
			case p.end <= t || p.start < t && keep[p.k]:
				busy[p.slot] = max(busy[p.slot], p.end)
			default:
				delete(ready, p.k)
				if p.cold {
					warm[p.slot] = false // what it left is no tree to build in
				}
			}
		}
		copy(free, busy)
		pending = pending[:0]
		at, have := ready[k]
		switch {
		case have:
		case b.built:
			at = place(t).end
		default:
			at = t // booted before: in the cache
		}
		t = max(t, at)
		ready[k] = at
		for _, a := range b.ahead {
			ak := a
			if _, ok := ready[ak]; ok {
				continue // built, building or booted before
			}
			p := place(at)
			p.k, ready[ak] = ak, p.end
			pending = append(pending, p)
		}
		t += perBoot + time.Duration(b.samples)*c.sample
	}
	return t
}

// handTrace is the trace the tests price by hand: the bad endpoint 9 and
// the good one, then commits 4, 6 and 5, each with what it builds ahead.
func handTrace() []bootRecord {
	return []bootRecord{
		{commit: 9, built: true, samples: 5, ahead: []kernel{{commit: -1}}},
		{commit: -1, built: true, samples: 5},
		{commit: 4, built: true, samples: 3, ahead: []kernel{{commit: 2}, {commit: 6}}},
		{commit: 6, built: true, samples: 3, ahead: []kernel{{commit: 5}}},
		{commit: 5, built: true, samples: 3},
	}
}

// A trace priced by hand: the good endpoint builds while the bad one is
// measured and is ready when its boot comes; of two kernels planned
// while commit 4 is measured, the one building when commit 6 is asked for
// is cancelled and 6, queued behind it, is dropped and built on the
// spot; 5 builds while 6 is measured and its boot waits for the rest.
func TestSpeedPriceAheadHidesThePredictedBuilds(t *testing.T) {
	m := time.Minute
	c := speedCosts{cold: 25 * m, incremental: 6 * m, kexec: 40 * time.Second, settle: 20 * time.Second, sample: m}
	trace := handTrace()
	// 9 cold by 25, measured until 31 while -1 builds (25–31); -1 until
	// 37; 4 built 37–43, measured until 47 while 2 builds (43–49), 6
	// queued; at 47 both go, 6 built 47–53, measured until 57 while 5
	// builds (53–59); 5 waits until 59, measured until 63.
	if got := speedPriceAhead(trace, c, c.kexec+c.settle, 1); got != 63*m {
		t.Errorf("with builds ahead %v, want 63m", got)
	}
	if got := speedPrice(trace, c, c.kexec+c.settle); got != 73*m {
		t.Errorf("without %v, want 73m", got)
	}
	if got := speedFloor(trace, c); got != 49*m {
		t.Errorf("floor %v, want 49m", got)
	}
}

// The same trace on a build server of two slots whose cold build takes
// 8 minutes: the two kernels planned while commit 4 is measured build at
// once, 2 in the warm slot and 6 in the cold one, so when 6 is asked for
// its build goes on (2's is cancelled) and is ready 2 minutes sooner than
// on one slot, where it was dropped and built again.
func TestSpeedPriceAheadBuildsInEverySlot(t *testing.T) {
	m := time.Minute
	c := speedCosts{cold: 8 * m, incremental: 6 * m, kexec: 40 * time.Second, settle: 20 * time.Second, sample: m}
	trace := handTrace()
	// 9 cold in slot 0 by 8, measured until 14 while -1 builds there
	// (8–14); -1 until 20; 4 built 20–26, measured until 30 while 2
	// builds in slot 0 (26–32) and 6 in slot 1, cold (26–34); at 30, 2 is
	// cancelled, 6 goes on: measured 34–38 while 5 builds (34–40); 5
	// measured 40–44.
	if got := speedPriceAhead(trace, c, c.kexec+c.settle, 2); got != 44*m {
		t.Errorf("two slots: %v, want 44m", got)
	}
	// One slot: 6, queued behind 2, is dropped at 30 and built 30–36,
	// measured 36–40 while 5 builds (36–42), measured 42–46.
	if got := speedPriceAhead(trace, c, c.kexec+c.settle, 1); got != 46*m {
		t.Errorf("one slot: %v, want 46m", got)
	}
	if got := speedFloor(trace, c); got != 32*m {
		t.Errorf("floor %v, want 32m", got)
	}
}
