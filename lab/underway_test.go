package lab

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"kbisect/internal/shell"
	"kbisect/internal/simlab"
	"kbisect/kbuild"
)

// TestMachinesBuildAKernelOnce: two machines' pipelines, each with its
// own slot of one cache, that need one commit at once build it once —
// the second waits for the first's build and takes the kernel from the
// cache — and a commit that does not build is tried once for both.
// Without UnderWay each builds it in its own slot.
func TestMachinesBuildAKernelOnce(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 9, Commits: 120, BrokenBuilds: 8})
	broken := r.brokenCommit(t)
	var good []string
	for _, c := range r.lab.Tree.Commits {
		if r.lab.Tree.Builds(c) {
			good = append(good, c)
		}
	}
	var mu sync.Mutex
	checkouts := map[string]int{}
	ctx := shell.WithTracer(context.Background(), func(where, command string) {
		if i := strings.Index(command, " checkout -q --detach "); i >= 0 {
			mu.Lock()
			checkouts[strings.TrimSpace(command[i+len(" checkout -q --detach "):])]++
			mu.Unlock()
		}
	})
	both := func(u *UnderWay, commit string) ([2]*kbuild.Artifact, [2]error) {
		var arts [2]*kbuild.Artifact
		var errs [2]error
		var wg sync.WaitGroup
		for i := range 2 {
			p := r.pipeline()
			p.Slot, p.UnderWay = i, u
			wg.Add(1)
			go func() {
				defer wg.Done()
				arts[i], errs[i] = p.kernel(ctx, commit)
			}()
		}
		wg.Wait()
		return arts, errs
	}
	u := &UnderWay{}
	arts, errs := both(u, good[len(good)/2])
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("the kernel of %s: %v, %v", good[len(good)/2][:12], errs[0], errs[1])
	}
	if n := checkouts[good[len(good)/2]]; n != 1 || arts[0].Dir != arts[1].Dir || arts[0].Cached == arts[1].Cached {
		t.Errorf("two machines, one commit: %d builds, artifacts %s (cached %v) and %s (cached %v); want one build, one kernel from the cache", n, arts[0].Dir, arts[0].Cached, arts[1].Dir, arts[1].Cached)
	}
	_, errs = both(u, broken)
	var b0, b1 *kbuild.BuildError
	if !errors.As(errs[0], &b0) || !errors.As(errs[1], &b1) || checkouts[broken] != 1 {
		t.Errorf("two machines, a commit that does not build: %v, %v after %d builds; want a build error each after one build", errs[0], errs[1], checkouts[broken])
	}
	// Without it, each builds in its own slot: the test can tell.
	alone := good[len(good)/4]
	if _, errs := both(nil, alone); errs[0] != nil || errs[1] != nil || checkouts[alone] != 2 {
		t.Errorf("without UnderWay: %v, %v after %d builds; want two", errs[0], errs[1], checkouts[alone])
	}
}
