package lab

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kbisect/internal/shell"
	"kbisect/internal/simlab"
	"kbisect/kbuild"
	"kbisect/progress"
)

// TestAKernelThatFailedToBuildAheadIsNotBuiltAgain: the build ahead
// learns that a commit does not build; when the bisection comes to it,
// the pipeline skips it on that knowledge instead of building it again.
func TestAKernelThatFailedToBuildAheadIsNotBuiltAgain(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 9, Commits: 120, BrokenBuilds: 8})
	broken := r.brokenCommit(t)
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

// brokenCommit is a commit of the run's tree that does not build.
func (r *simRun) brokenCommit(t *testing.T) string {
	t.Helper()
	for _, c := range r.lab.Tree.Broken {
		if !r.lab.Tree.Builds(c) {
			return c
		}
	}
	t.Fatal("the tree has no commit that does not build")
	return ""
}

// TestABuildServersSlotsBuildAheadAtOnce: with a build server of two
// slots, Go starts the two nearest kernels at once (the third waits its
// turn) and the server builds them side by side, in both its slots; the
// pipeline waiting for the first does not stop the second, which one
// slot would have stopped, and while the pipeline holds one slot the
// other goes on with the third; all are then in the local cache.
func TestABuildServersSlotsBuildAheadAtOnce(t *testing.T) {
	exe := testKbisect(t)
	local, commits := serverTree(t,
		map[string]string{"kernel/eventpoll.c": "int ep_poll_callback(void) { return 2; }\n"},
		map[string]string{"kernel/eventpoll.c": "int ep_poll_callback(void) { return 3; }\n"},
		map[string]string{"kernel/eventpoll.c": "int ep_poll_callback(void) { return 4; }\n"},
		map[string]string{"kernel/eventpoll.c": "int ep_poll_callback(void) { return 5; }\n"},
		map[string]string{"kernel/eventpoll.c": "int ep_poll_callback(void) { return 6; }\n"})
	server, home := buildServerFor(t, local, exe)
	o := kbuild.Options{Tree: local, Base: "tinyconfig", Jobs: 1, CacheDir: t.TempDir(), Server: server}
	built := make(chan string, 8)
	var mu sync.Mutex
	started := map[string]int{}
	ahead := &Ahead{Build: o, Slots: server.Slots(), Progress: progress.Func(func(e progress.Event) {
		switch {
		case e.Kind == progress.Note && e.Text == "built ahead":
			built <- e.Commit
		case e.Kind == progress.Note && e.Text == "building ahead":
			mu.Lock()
			started[e.Commit]++
			mu.Unlock()
		}
	})}
	defer ahead.Close()

	ahead.Expect(commits[0], commits[1], commits[2], commits[3])
	running := func() []string {
		ahead.mu.Lock()
		defer ahead.mu.Unlock()
		var cs []string
		for _, j := range ahead.running {
			cs = append(cs, j.commit)
		}
		return cs
	}
	if got := running(); len(got) != 0 {
		t.Fatalf("before Go, %v build ahead: the pipeline has not built its kernel", got)
	}
	ahead.Go()
	if got := running(); !slices.Equal(got, commits[1:3]) {
		t.Fatalf("after Go, %v build ahead; want the two nearest %v at once", got, commits[1:3])
	}
	if be := ahead.Wait(context.Background(), commits[1]); be != nil {
		t.Fatalf("%s did not build ahead: %v", commits[1][:12], be)
	}
	// Held for the pipeline, which needs no slot for a kernel built
	// ahead: commits[2] goes on (it was not stopped to make way), and
	// commits[3] starts when it ends, one slot left for the pipeline;
	// both without another Go.
	deadline := time.After(2 * time.Minute)
	for seen := map[string]bool{}; !seen[commits[2]] || !seen[commits[3]]; {
		select {
		case c := <-built:
			seen[c] = true
		case <-deadline:
			t.Fatalf("built ahead %v while the pipeline waited for %s; want %s (not stopped to make way) and %s (in the spare slot)",
				seen, commits[1][:12], commits[2][:12], commits[3][:12])
		}
	}
	mu.Lock()
	if started[commits[2]] != 1 {
		t.Errorf("%s started ahead %d times, want once: stopped and built again", commits[2][:12], started[commits[2]])
	}
	mu.Unlock()
	for _, c := range commits[1:4] {
		a, err := kbuild.Build(context.Background(), o, 0, c)
		if err != nil || !a.Cached {
			t.Fatalf("%s after its build ahead: %+v %v, want it in the cache", c[:12], a, err)
		}
	}
	slots, _ := filepath.Glob(filepath.Join(home, ".cache", "kbisect", "build-cache", "slots", "*", "slot-*"))
	if len(slots) != 2 {
		t.Errorf("the server built in %v, want both its slots", slots)
	}

	// A plan that changes: what it dropped (ending, still listed) is
	// neither stopped again nor queued again when the pipeline makes way
	// for its kernel.
	ahead.Expect(commits[1], commits[4], commits[5])
	ahead.Go()
	ahead.Expect(commits[0])
	ahead.Wait(context.Background(), commits[0])
	ahead.mu.Lock()
	queued := slices.Clone(ahead.queue)
	ahead.mu.Unlock()
	if len(queued) != 0 {
		t.Errorf("after a plan that dropped them, %v are queued again", queued)
	}
}
