package kbuild

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// stage writes a collected artifact as a builder would leave it for
// publish: its files in a temporary directory beside dir, summed.
func stage(t *testing.T, dir, content string) (*Artifact, string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".*.tmp")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bzImage", "System.map", "config"} {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(name+" of "+content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sums, err := sumFiles(tmp)
	if err != nil {
		t.Fatal(err)
	}
	return &Artifact{Dir: dir, Key: filepath.Base(dir), Release: content, Files: sums}, tmp
}

func TestBuildersPublishingOneKeyAtOnceLeaveOneWholeArtifact(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "artifacts", "0123456789abcdef0123456789abcdef")
	const builders = 8
	type result struct {
		a   *Artifact
		err error
	}
	results := make([]result, builders)
	tmps := make([]string, builders)
	arts := make([]*Artifact, builders)
	for i := range arts {
		// Each builder's files differ, so a mix of two would show.
		arts[i], tmps[i] = stage(t, dir, fmt.Sprintf("builder %d", i))
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < builders; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			a, err := Options{CacheDir: cache}.publish(tmps[i], arts[i])
			results[i] = result{a, err}
		}(i)
	}
	close(start)
	wg.Wait()
	if err := Check(dir); err != nil {
		t.Fatalf("the published artifact does not verify: %v", err)
	}
	onDisk, err := loadArtifact(dir)
	if err != nil {
		t.Fatal(err)
	}
	winners := 0
	for i, r := range results {
		if r.err != nil {
			t.Errorf("builder %d: %v", i, r.err)
			continue
		}
		if r.a.Release != onDisk.Release || r.a.Dir != dir {
			t.Errorf("builder %d was given %s at %s; the cache holds %s", i, r.a.Release, r.a.Dir, onDisk.Release)
		}
		if arts[i].Release == onDisk.Release {
			winners++
		}
	}
	if winners != 1 {
		t.Errorf("%d builders' artifacts are the one in the cache, want 1", winners)
	}
	// Every file is the winner's.
	for name := range onDisk.Files {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != name+" of "+onDisk.Release {
			t.Errorf("%s holds %q (%v), not the winner's", name, b, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(cache, "artifacts", "*.tmp")); len(left) != 0 {
		t.Errorf("the losers left %v", left)
	}
}

func TestPublishingOverADamagedArtifactReplacesIt(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "artifacts", "fedcba9876543210fedcba9876543210")
	old, tmp := stage(t, dir, "old")
	if _, err := (Options{CacheDir: cache}).publish(tmp, old); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bzImage"), []byte("cut sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	fresh, tmp := stage(t, dir, "new")
	a, err := Options{CacheDir: cache, Log: &log}.publish(tmp, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(dir); err != nil || a.Release != "new" {
		t.Errorf("after publishing over a damaged artifact: %s, check %v", a.Release, err)
	}
	if strings.Contains(log.String(), "first") {
		t.Errorf("a damaged artifact was taken for a race lost: %s", log.String())
	}
}

func TestTwoControllersBuildingOneKernelIntoASharedCacheAgree(t *testing.T) {
	tree, commits := fakeTree(t)
	shared := buildOptions(t, tree)
	var wg sync.WaitGroup
	arts := make([]*Artifact, 2)
	errs := make([]error, 2)
	start := make(chan struct{})
	for i := range arts {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			o := shared
			var log bytes.Buffer
			o.Log = &log
			arts[i], errs[i] = Build(context.Background(), o, i, commits[0])
		}(i)
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("controller %d: %v", i, err)
		}
	}
	if arts[0].Dir != arts[1].Dir {
		t.Fatalf("one kernel, two artifacts: %s and %s", arts[0].Dir, arts[1].Dir)
	}
	if err := Check(arts[0].Dir); err != nil {
		t.Fatal(err)
	}
	if again, err := Build(context.Background(), shared, 0, commits[0]); err != nil || !again.Cached {
		t.Errorf("the shared artifact is not a cache hit: cached %v, %v", again != nil && again.Cached, err)
	}
}
