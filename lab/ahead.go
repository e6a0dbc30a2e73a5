package lab

import (
	"context"
	"errors"
	"slices"
	"sync"

	"kbisect/kbuild"
	"kbisect/progress"
)

// Ahead builds, while the host measures a commit, the commits that come
// next whether it turns out good or bad: the host never waits for a build
// it could have had. On this machine it builds in the pipeline's own slot,
// one build at a time and only while the pipeline does not build, so
// every build is incremental and no second worktree takes disk. With a
// build server of several slots (Slots) it runs that many builds at once
// there, one fewer while the pipeline builds its own kernel. Built
// kernels land in the cache, where the pipeline finds them, and a kernel
// that does not build is remembered, so the pipeline does not build it
// again to learn that.
type Ahead struct {
	Build kbuild.Options
	Slot  int
	// Slots is how many builds may run at once: a build server's
	// build.slots (0 or 1: one, in Slot).
	Slots int
	// Progress hears what it does, as progress.Note events (nil:
	// nothing).
	Progress progress.Sink
	// Base is the context builds run under (nil: none): its end stops
	// them, its values (-v's tracer) reach them.
	Base context.Context

	mu      sync.Mutex
	queue   []string
	held    bool        // the pipeline builds: start nothing, or one fewer on a server
	running []*aheadJob // in the order they started: nearest first
	wg      sync.WaitGroup
	closed  bool
	failed  map[string]*kbuild.BuildError
	built   map[string]bool // built ahead: in the cache
}

// aheadJob is a build ahead under way. A dropped one was stopped as no
// longer needed and is ending: it builds nothing more, is never queued
// again, and holds its slot only until it ends.
type aheadJob struct {
	commit  string
	cancel  context.CancelFunc
	done    chan struct{}
	dropped bool
}

// Width is how many builds ahead may run at once (Slots, at least one).
func (a *Ahead) Width() int { return max(a.Slots, 1) }

// Expect is called when the search is about to boot now: next may come
// after it, nearest first, and is queued (dropping what an earlier call
// queued and no longer needs; a build ahead of now goes on, the pipeline
// waits for it). Queued builds start at Go, once now's kernel is built.
func (a *Ahead) Expect(now string, next ...string) { a.expect(now, next) }

func (a *Ahead) expect(now string, next []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.held = true
	for _, j := range a.running {
		if j.commit != now && !slices.Contains(next, j.commit) {
			j.cancel() // the other branch: not needed any more
			j.dropped = true
		}
	}
	a.queue = a.queue[:0]
	for _, c := range next {
		if c != "" && c != now && !a.runningLocked(c) && !slices.Contains(a.queue, c) {
			a.queue = append(a.queue, c)
		}
	}
}

// runningLocked says whether commit builds ahead now (not dropped);
// a.mu is held.
func (a *Ahead) runningLocked(commit string) bool {
	return slices.ContainsFunc(a.running, func(j *aheadJob) bool { return j.commit == commit && !j.dropped })
}

// Queue adds commits to build ahead, after what is queued: before the
// bisection, the good endpoint while the bad one is measured, and the
// first commit to test while the good one is. They start at Go.
func (a *Ahead) Queue(commits ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range commits {
		if c != "" && !a.runningLocked(c) && !slices.Contains(a.queue, c) {
			a.queue = append(a.queue, c)
		}
	}
}

// Go lets the queued builds start: the commit under test is built and the
// host busy with it.
func (a *Ahead) Go() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.held = false
	a.startLocked()
}

// roomLocked is how many more builds may start now; a.mu is held.
func (a *Ahead) roomLocked() int {
	width := a.Width()
	if a.held {
		// The pipeline builds: on this machine it has the slot and the
		// CPUs; on a build server it takes one of the slots.
		width--
	}
	return width - len(a.running)
}

// startLocked starts queued builds while there is room; a.mu is held.
func (a *Ahead) startLocked() {
	for len(a.queue) > 0 && !a.closed && a.roomLocked() > 0 {
		commit := a.queue[0]
		a.queue = a.queue[1:]
		a.startOneLocked(commit)
	}
}

// startOneLocked starts the build ahead of commit; a.mu is held.
func (a *Ahead) startOneLocked(commit string) {
	base := a.Base
	if base == nil {
		base = context.Background()
	}
	ctx, cancel := context.WithCancel(base)
	j := &aheadJob{commit: commit, cancel: cancel, done: make(chan struct{})}
	a.running = append(a.running, j)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if a.Progress != nil {
			a.note(commit, "building ahead")
		}
		_, err := kbuild.Build(ctx, a.Build, a.Slot, commit)
		switch {
		case a.Progress == nil:
		case err == nil:
			a.note(commit, "built ahead")
		case errors.As(err, new(*kbuild.BuildError)):
			a.note(commit, "does not build (found ahead)")
		}
		cancel()
		var be *kbuild.BuildError
		failed := errors.As(err, &be)
		a.mu.Lock()
		if failed {
			if a.failed == nil {
				a.failed = map[string]*kbuild.BuildError{}
			}
			a.failed[commit] = be
		}
		if err == nil {
			if a.built == nil {
				a.built = map[string]bool{}
			}
			a.built[commit] = true
		}
		close(j.done)
		a.running = slices.DeleteFunc(a.running, func(o *aheadJob) bool { return o == j })
		a.startLocked()
		a.mu.Unlock()
	}()
}

// Wait makes way for the pipeline's build of commit: a build ahead of
// that commit is waited for (its kernel is then in the cache); on this
// machine any other is stopped, on a build server the farthest are
// stopped until a slot is left for the pipeline; and nothing more starts
// until Go. A queued build of the commit is dropped: the pipeline builds
// it now. When the commit's kernel did not build ahead, Wait returns why.
func (a *Ahead) Wait(ctx context.Context, commit string) *kbuild.BuildError {
	a.mu.Lock()
	a.held = true
	if i := slices.Index(a.queue, commit); i >= 0 {
		a.queue = slices.Delete(a.queue, i, i+1)
	}
	var wait []chan struct{}
	var stopped []string
	mine, live := false, 0
	for _, j := range a.running {
		switch {
		case j.dropped:
			// Ending: on this machine the pipeline waits for it to
			// leave the slot; on a server it leaves one when it ends.
			if a.Width() == 1 {
				wait = append(wait, j.done)
			}
		case j.commit == commit:
			mine = true
			wait = append(wait, j.done)
		default:
			live++
		}
	}
	// Stop the farthest builds still wanted until the pipeline has a
	// slot (its own build, when it is running ahead, needs none): built
	// again after Go, from what make got through.
	for i := len(a.running) - 1; i >= 0; i-- {
		j := a.running[i]
		if j.commit == commit || j.dropped {
			continue
		}
		if !mine && !a.built[commit] && live-len(stopped) >= a.Width() || a.Width() == 1 {
			j.cancel()
			j.dropped = true
			stopped = append([]string{j.commit}, stopped...)
			wait = append(wait, j.done)
		}
	}
	a.queue = append(stopped, a.queue...)
	a.mu.Unlock()
	for _, done := range wait {
		select {
		case <-done:
		case <-ctx.Done():
			return nil
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.failed[commit]
}

// Close stops the builds ahead and waits for them to end.
func (a *Ahead) Close() {
	a.mu.Lock()
	a.closed = true
	a.queue = nil
	for _, j := range a.running {
		j.cancel()
	}
	a.mu.Unlock()
	a.wg.Wait()
}

func (a *Ahead) note(commit, what string) {
	a.Progress.Emit(progress.Event{Kind: progress.Note, Commit: commit, Text: what})
}
