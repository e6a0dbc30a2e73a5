package lab

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"kbisect/internal/shell"
	"kbisect/internal/simlab"
	"kbisect/progress"
)

// TestAKernelThatFailedToBuildAheadIsNotBuiltAgain: the build ahead
// learns that a commit does not build; when the bisection comes to it,
// the pipeline skips it on that knowledge instead of building it again.
func TestAKernelThatFailedToBuildAheadIsNotBuiltAgain(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 9, Commits: 120, BrokenBuilds: 8})
	broken := ""
	for _, c := range r.lab.Tree.Broken {
		if !r.lab.Tree.Builds(c) {
			broken = c
			break
		}
	}
	if broken == "" {
		t.Fatal("the tree has no commit that does not build")
	}
	var mu sync.Mutex
	checkouts := 0
	ctx := shell.WithTracer(context.Background(), func(where, command string) {
		if strings.Contains(command, " checkout -q --detach "+broken) {
			mu.Lock()
			checkouts++
			mu.Unlock()
		}
	})
	found := make(chan struct{})
	ahead := &Ahead{Build: r.pipe.Build, Base: ctx, Progress: progress.Func(func(e progress.Event) {
		if e.Kind == progress.Note && e.Commit == broken && strings.HasPrefix(e.Text, "does not build") {
			close(found)
		}
	})}
	defer ahead.Close()
	r.pipe.Ahead = ahead
	ahead.Queue(broken)
	ahead.Go()
	select {
	case <-found:
	case <-time.After(time.Minute):
		t.Fatal("the build ahead did not find the commit broken")
	}
	ev, err := r.pipe.Evidence(ctx, broken)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ev.Verdict != "skip" || !strings.HasPrefix(ev.Reason, "does not build: ") || checkouts != 1 {
		t.Errorf("%s: %s (%s) after %d builds", broken[:12], ev.Verdict, ev.Reason, checkouts)
	}
}
