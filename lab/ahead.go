package lab

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/kbuild"
	"kbisect/progress"
	"kbisect/verdict"
)

// Ahead builds, while the host measures a commit, the commits that come
// next whether it turns out good or bad: the host never waits for a build
// it could have had. It builds in the pipeline's own slot, one build at a
// time and only while the pipeline does not build, so every build is
// incremental and no second worktree takes disk; built kernels land in the
// cache, where the pipeline finds them, and a kernel that does not build
// is remembered, so the pipeline does not build it again to learn that.
type Ahead struct {
	// Session is the bisection; Graph a second graph of the same
	// repository, so that looking ahead never changes what the session
	// has parsed (and so its git-identical choices). Both nil for the
	// posterior search, which says what comes next itself (Expect).
	Session *bisect.Session
	Graph   *bisect.Graph
	Build   kbuild.Options
	Slot    int
	// Progress hears what it does, as progress.Note events (nil:
	// nothing).
	Progress progress.Sink
	// Base is the context builds run under (nil: none): its end stops
	// them, its values (-v's tracer) reach them.
	Base context.Context

	mu      sync.Mutex
	queue   []string
	held    bool // the pipeline builds: start nothing
	running string
	cancel  context.CancelFunc
	done    chan struct{}
	wg      sync.WaitGroup
	closed  bool
	failed  map[string]*kbuild.BuildError
}

// Plan is called when the session is about to test a commit: it looks at
// both verdicts' next commits and queues them, dropping what an earlier
// plan queued and no longer needs. A build ahead of the commit about to
// be tested goes on (the pipeline waits for it). Queued builds start at
// Go, once the commit's own kernel is built.
func (a *Ahead) Plan(step bisect.Step) {
	if step.Kind != bisect.StepTest || a.Session == nil {
		return
	}
	var next []string
	for _, v := range []verdict.Verdict{verdict.Bad, verdict.Good} {
		f := a.Session.Fork(a.Graph)
		if err := f.Mark(step.Commit, v); err != nil {
			continue
		}
		if n, err := f.Next(); err == nil && n.Kind == bisect.StepTest && n.Commit != plumbing.ZeroHash {
			next = append(next, n.Commit.String())
		}
	}
	a.expect(step.Commit.String(), next)
}

// Expect is Plan for what is not a bisection step (the walk back to a
// good release): now is about to be tested, next may come after it.
func (a *Ahead) Expect(now string, next ...string) { a.expect(now, next) }

func (a *Ahead) expect(now string, next []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.held = true
	if a.running != "" && a.running != now && !slices.Contains(next, a.running) && a.cancel != nil {
		a.cancel() // the other branch: not needed any more
	}
	a.queue = a.queue[:0]
	for _, c := range next {
		if c != "" && c != a.running && c != now {
			a.queue = append(a.queue, c)
		}
	}
}

// Queue adds commits to build ahead, after what is queued: before the
// bisection, the good endpoint while the bad one is measured, and the
// first commit to test while the good one is. They start at Go.
func (a *Ahead) Queue(commits ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range commits {
		if c != "" && c != a.running && !slices.Contains(a.queue, c) {
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
	if a.running == "" {
		a.startLocked()
	}
}

// startLocked starts the next queued build; a.mu is held.
func (a *Ahead) startLocked() {
	if len(a.queue) == 0 || a.closed || a.held {
		return
	}
	commit := a.queue[0]
	a.queue = a.queue[1:]
	base := a.Base
	if base == nil {
		base = context.Background()
	}
	ctx, cancel := context.WithCancel(base)
	done := make(chan struct{})
	a.running, a.cancel, a.done = commit, cancel, done
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
		close(done)
		a.running, a.cancel, a.done = "", nil, nil
		a.startLocked()
		a.mu.Unlock()
	}()
}

// Wait makes way for the pipeline's build of commit: a build ahead of
// that commit is waited for (its kernel is then in the cache), any other
// is stopped, and nothing starts until Go. A queued build of the commit
// is dropped: the pipeline builds it now. When the commit's kernel did
// not build ahead, Wait returns why.
func (a *Ahead) Wait(ctx context.Context, commit string) *kbuild.BuildError {
	a.mu.Lock()
	a.held = true
	for i, c := range a.queue {
		if c == commit {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			break
		}
	}
	if a.running != "" && a.running != commit && a.cancel != nil {
		// Still wanted (Plan stops what is not): built again after Go,
		// from what make got through.
		a.cancel()
		a.queue = append([]string{a.running}, a.queue...)
	}
	done := a.done
	a.mu.Unlock()
	if done != nil {
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
	if a.cancel != nil {
		a.cancel()
	}
	a.mu.Unlock()
	a.wg.Wait()
}

func (a *Ahead) note(commit, what string) {
	a.Progress.Emit(progress.Event{Kind: progress.Note, Commit: commit, Text: what})
}
