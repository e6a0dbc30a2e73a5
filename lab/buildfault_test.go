package lab

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

	"kbisect/internal/simlab"
	"kbisect/kbuild"
)

// fillingLog is a build log that fills the file system of path when
// kbisect says make starts: the build disk filling up mid-run.
type fillingLog struct {
	t    *testing.T
	path string
	once sync.Once
}

func (w *fillingLog) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "kbisect: building ") {
		w.once.Do(func() {
			f, err := os.Create(w.path)
			if err != nil {
				w.t.Error(err)
				return
			}
			defer f.Close()
			chunk := make([]byte, 4096)
			for {
				if _, err := f.Write(chunk); err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						w.t.Error(err)
					}
					return
				}
			}
		})
	}
	return len(p), nil
}

// TestABuildDiskThatFillsStopsTheRunWithoutASkip: the build cache on a
// tmpfs that fills as make starts stops the test of the commit with the
// disk named, records no verdict, and the same test once there is room
// again measures the commit.
func TestABuildDiskThatFillsStopsTheRunWithoutASkip(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root: run as root to test a build disk that fills")
	}
	r := newSimRun(t, simlab.Options{Seed: 29, Commits: 80})
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	r.pipe.Build.CacheDir = filepath.Join(mnt, "cache")
	filler := filepath.Join(mnt, "other-job")
	r.pipe.Build.Log = &fillingLog{t: t, path: filler}
	good := r.lab.Tree.GoodCommit
	_, err := r.pipe.Evidence(context.Background(), good)
	var se *kbuild.SetupError
	if !errors.As(err, &se) || se.Fault != kbuild.FaultDisk {
		t.Fatalf("got %T %v, want the build disk's fault", err, err)
	}
	if _, err := ReadEvidence(r.state, good); !os.IsNotExist(err) {
		t.Errorf("a commit the lab could not build has evidence: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	r.pipe.Build.Log = nil
	if ev, err := r.pipe.Evidence(context.Background(), good); err != nil || ev.Verdict != "good" {
		t.Errorf("with room again: %+v %v", ev, err)
	}
}
