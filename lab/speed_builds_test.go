package lab

import (
	"slices"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/verdict"
)

// speedSlot is a build slot: a worktree and an output directory of its
// own. Slot 0 is the pipeline's.
type speedSlot struct {
	// extra is what its next build costs beyond an incremental one: the
	// cold build's surplus until a build in it is done.
	extra      time.Duration
	commit     plumbing.Hash // the build running; zero when idle
	start, end time.Duration
}

// speedBuilds are the builds of one kbisect run as the pipeline and
// lab.Ahead make them. Slot 0 is the pipeline's own, where lab.Ahead
// builds too: one build at a time, and none started while held (from
// Plan or Wait until Go, when the pipeline builds). More slots are the
// hypothetical variants' extra build capacity, on CPUs of their own;
// nothing holds them.
type speedBuilds struct {
	costs    speedCosts
	slots    []*speedSlot
	maxSlots int // 0: as many as wanted
	held     bool
	queue    []plumbing.Hash
	built    map[plumbing.Hash]bool
	// builds started (cache hits not counted), of them cancelled.
	builds, cancels int
}

// newSpeedBuilds is a run's builds before its first: slot 0 is cold.
func newSpeedBuilds(c speedCosts, maxSlots int) *speedBuilds {
	return &speedBuilds{costs: c, maxSlots: maxSlots, built: map[plumbing.Hash]bool{},
		slots: []*speedSlot{{extra: c.cold - c.incremental}}}
}

func (b *speedBuilds) running(c plumbing.Hash) *speedSlot {
	for _, s := range b.slots {
		if s.commit == c {
			return s
		}
	}
	return nil
}

// start gives the queued builds, in order, to the idle slots that may
// build (the warmest first), opening new, cold slots as far as allowed.
// A queued commit already built is a cache hit: kbuild finds it from its
// inputs in no time worth counting.
func (b *speedBuilds) start(t time.Duration) {
	for len(b.queue) > 0 {
		c := b.queue[0]
		if b.built[c] {
			b.queue = b.queue[1:]
			continue
		}
		var idle *speedSlot
		for i, s := range b.slots {
			if s.commit.IsZero() && (i > 0 || !b.held) && (idle == nil || s.extra < idle.extra) {
				idle = s
			}
		}
		if idle == nil {
			if b.maxSlots > 0 && len(b.slots) >= b.maxSlots {
				return
			}
			idle = &speedSlot{extra: b.costs.cold - b.costs.incremental}
			b.slots = append(b.slots, idle)
		}
		b.queue = b.queue[1:]
		idle.commit, idle.start, idle.end = c, t, t+b.costs.incremental+idle.extra
		b.builds++
	}
}

// advance finishes, in order, the builds that end by t; each freed slot
// takes the next queued build unless held, as lab.Ahead's goroutine does.
func (b *speedBuilds) advance(t time.Duration) {
	for {
		var first *speedSlot
		for _, s := range b.slots {
			if !s.commit.IsZero() && s.end <= t && (first == nil || s.end < first.end) {
				first = s
			}
		}
		if first == nil {
			return
		}
		b.built[first.commit] = true
		first.commit, first.extra = plumbing.ZeroHash, 0
		b.start(first.end)
	}
}

// cancel stops s's build at t. What make compiled stays in the slot, but
// the commit is on the branch the verdict ruled out (in a bisection
// without skips it is never tested), and the slot's next build, of
// another commit, recompiles what differs from the slot's state whether
// or not this build got half-way: it costs an incremental build either
// way. So a cancelled build keeps no progress, but in a cold slot (only
// the hypothetical variants have more than slot 0): there the share of
// the cold surplus it got through stays done, the objects nearby commits
// share.
func (b *speedBuilds) cancel(s *speedSlot, t time.Duration) {
	done := float64(t-s.start) / float64(s.end-s.start)
	s.extra -= time.Duration(float64(s.extra) * done).Round(time.Second)
	s.commit = plumbing.ZeroHash
	b.cancels++
}

// plan is Ahead.Plan at t, just before the session's commit now is
// tested: slot 0 is held; a build of neither now nor a next commit (the
// other branch's) is cancelled, one of now goes on; the queue becomes the
// next commits, in next's order (after bad first), but now and those
// building. Extra slots start on the queue at once.
func (b *speedBuilds) plan(t time.Duration, now plumbing.Hash, next []plumbing.Hash) {
	b.advance(t)
	b.held = true
	for _, s := range b.slots {
		if !s.commit.IsZero() && s.commit != now && !slices.Contains(next, s.commit) {
			b.cancel(s, t)
		}
	}
	b.queue = b.queue[:0]
	for _, c := range next {
		if c != now && b.running(c) == nil && !slices.Contains(b.queue, c) {
			b.queue = append(b.queue, c)
		}
	}
	b.start(t)
}

// wait is Ahead.Wait at t, before the pipeline builds c: c leaves the
// queue, slot 0's build of another commit is cancelled (as lab.Ahead
// cancels any but c's: it has slot 0 only) and queued again first, and a
// running build of c is waited for. It returns when the pipeline's build
// can begin.
func (b *speedBuilds) wait(t time.Duration, c plumbing.Hash) time.Duration {
	b.advance(t)
	b.held = true
	if i := slices.Index(b.queue, c); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
	}
	if s := b.slots[0]; !s.commit.IsZero() && s.commit != c {
		b.queue = append([]plumbing.Hash{s.commit}, b.queue...)
		b.cancel(s, t)
	}
	if s := b.running(c); s != nil {
		t = s.end
		b.advance(t)
	}
	return t
}

// build is the pipeline's kbuild.Build in slot 0: the artifact cache's
// when built before.
func (b *speedBuilds) build(t time.Duration, c plumbing.Hash) time.Duration {
	if b.built[c] {
		return t
	}
	s := b.slots[0]
	t += b.costs.incremental + s.extra
	s.extra = 0
	b.built[c] = true
	b.builds++
	return t
}

// queueAhead is Ahead.Queue: commits join the queue.
func (b *speedBuilds) queueAhead(cs ...plumbing.Hash) {
	for _, c := range cs {
		if !c.IsZero() && b.running(c) == nil && !slices.Contains(b.queue, c) {
			b.queue = append(b.queue, c)
		}
	}
}

// goAhead is Ahead.Go at t, once the pipeline's build is done: slot 0 is
// free again and the queued builds start.
func (b *speedBuilds) goAhead(t time.Duration) {
	b.held = false
	b.start(t)
}

// speedNext is what comes next after each verdict on commit, depth
// verdicts down, bad before good (lab.Ahead's order), asked of forks of
// the session on a second graph as lab.Ahead asks.
func speedNext(tb testing.TB, s *bisect.Session, g2 *bisect.Graph, commit plumbing.Hash, depth int) []plumbing.Hash {
	type node struct {
		s *bisect.Session
		c plumbing.Hash
	}
	level := []node{{s, commit}}
	var out []plumbing.Hash
	for range depth {
		var next []node
		for _, n := range level {
			for _, v := range []verdict.Verdict{verdict.Bad, verdict.Good} {
				f := n.s.Fork(g2)
				if err := f.Mark(n.c, v); err != nil {
					tb.Fatal(err)
				}
				st, err := f.Next()
				if err != nil {
					tb.Fatal(err)
				}
				if st.Kind == bisect.StepTest {
					out = append(out, st.Commit)
					next = append(next, node{f, st.Commit})
				}
			}
		}
		level = next
	}
	return out
}
