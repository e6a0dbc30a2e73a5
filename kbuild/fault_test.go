package kbuild

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// tmpfs mounts a tmpfs of size (mount's -o size=) for the test; it needs
// root, and says so when it is not.
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root: run as root to test builds on a full disk")
	}
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s): run where mount works to test builds on a full disk", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes path until the file system has no room left.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// fillAtMake is a build log that fills the disk when kbisect says it
// starts make: another job's files filling the build's disk mid-run.
type fillAtMake struct {
	t    *testing.T
	path string
	once sync.Once
	log  strings.Builder
}

func (w *fillAtMake) Write(p []byte) (int, error) {
	w.log.Write(p)
	if strings.Contains(string(p), "kbisect: building ") {
		w.once.Do(func() { fill(w.t, w.path) })
	}
	return len(p), nil
}

// TestABuildOnAFullDiskIsTheLabsNotTheCommits: with the build cache on a
// tmpfs that fills up as make starts, the shell says only "echo: I/O
// error"; the build is the machine's fault (free space measured after
// the failure), not a commit that does not build, and the same build
// succeeds once there is room again.
func TestABuildOnAFullDiskIsTheLabsNotTheCommits(t *testing.T) {
	mnt := tmpfs(t, "4m")
	tree, commits := fakeTree(t, map[string]string{"kernel/helper.c": "int helper(void) { return 7; }\n"})
	o := buildOptions(t, tree)
	o.CacheDir = filepath.Join(mnt, "cache")
	if _, err := Build(context.Background(), o, 0, commits[0]); err != nil {
		t.Fatalf("the first build, with room: %v", err)
	}
	filler := filepath.Join(mnt, "other-job")
	log := &fillAtMake{t: t, path: filler}
	o.Log = log
	_, err := Build(context.Background(), o, 0, commits[1])
	var se *SetupError
	if !errors.As(err, &se) || se.Fault != FaultDisk || errors.As(err, new(*BuildError)) {
		t.Fatalf("got %T %v, want the disk's fault\n%s", err, err, log.log.String())
	}
	if !strings.Contains(err.Error(), mnt) || !strings.Contains(err.Error(), "free of 4096 kB") {
		t.Errorf("the error does not name the full file system: %v", err)
	}
	t.Logf("%v", err)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	o.Log = nil
	a, err := Build(context.Background(), o, 0, commits[1])
	if err != nil || a.Cached {
		t.Errorf("with room again: %+v, %v", a, err)
	}
}

// TestACompilerErrorOnATmpfsWithRoomStillDoesNotBuild: the disk's check
// does not turn a commit's own compiler error into the lab's.
func TestACompilerErrorOnATmpfsWithRoomStillDoesNotBuild(t *testing.T) {
	mnt := tmpfs(t, "64m")
	tree, commits := fakeTree(t, map[string]string{"kernel/helper.c": "int helper(void) { return 0 }\n"})
	o := buildOptions(t, tree)
	o.CacheDir = filepath.Join(mnt, "cache")
	_, err := Build(context.Background(), o, 0, commits[1])
	var be *BuildError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "helper.c:1:28: error: expected") {
		t.Errorf("got %T %v", err, err)
	}
}

// TestAKilledCompilerIsTheLabsNotTheCommits: a compiler ended by SIGKILL
// (the OOM killer's signal; make says "Killed" or "Error 137") is memory
// the machine lacked, not code that does not build.
func TestAKilledCompilerIsTheLabsNotTheCommits(t *testing.T) {
	tree, commits := fakeTree(t, map[string]string{"kernel/helper.c": "int helper(void) { return 9; }\n"})
	o := buildOptions(t, tree)
	if _, err := Build(context.Background(), o, 0, commits[0]); err != nil {
		t.Fatal(err)
	}
	cc := filepath.Join(t.TempDir(), "cc")
	if err := os.WriteFile(cc, []byte("#!/bin/sh\nkill -KILL $$\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	o.MakeVars = map[string]string{"CC": cc}
	_, err := Build(context.Background(), o, 0, commits[1])
	var se *SetupError
	if !errors.As(err, &se) || se.Fault != FaultMemory {
		t.Fatalf("got %T %v, want the machine's memory", err, err)
	}
	t.Logf("%v", err)
}

// TestTheCachesOwnWritesOnAFullDiskAreTheLabs: an ENOSPC or EIO from
// kbisect's own writes is typed by its errno.
func TestTheCachesOwnWritesOnAFullDiskAreTheLabs(t *testing.T) {
	for errno, want := range map[syscall.Errno]Fault{syscall.ENOSPC: FaultDisk, syscall.EDQUOT: FaultDisk, syscall.EIO: FaultIO} {
		err := fileFault(&os.PathError{Op: "write", Path: "/cache/artifacts/x/meta.json.tmp", Err: errno})
		var se *SetupError
		if !errors.As(err, &se) || se.Fault != want {
			t.Errorf("%v: got %v", errno, err)
		}
	}
	if err := fileFault(os.ErrNotExist); errors.As(err, new(*SetupError)) {
		t.Errorf("a missing file became the disk's fault: %v", err)
	}
}
