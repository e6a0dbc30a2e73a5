package kbuild

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAMakeThatOutlivesBuildTimeoutIsKilledAsTheLabsFault: a compiler
// that hangs (and leaves a child of its own running) is killed with its
// whole process group once build.timeout passes; the error is the build
// machine's timeout fault naming build.timeout, never a commit that does
// not build.
func TestAMakeThatOutlivesBuildTimeoutIsKilledAsTheLabsFault(t *testing.T) {
	tree, commits := fakeTree(t)
	o := buildOptions(t, tree)
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	cc := filepath.Join(t.TempDir(), "cc")
	script := "#!/bin/sh\ncase $1 in --version) echo 'hangcc 1.0'; exit 0;; esac\nsleep 600 &\necho $! >" + pidFile + "\nwait\n"
	if err := os.WriteFile(cc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	o.MakeVars = map[string]string{"CC": cc}
	o.Timeout = 10 * time.Second
	// Without the timeout, the run's own context would end the build
	// much later, and the error would be the context's.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, err := Build(ctx, o, 0, commits[0])
	var se *SetupError
	if !errors.As(err, &se) || se.Fault != FaultTimeout || errors.As(err, new(*BuildError)) {
		t.Fatalf("got %T %v, want the build machine's timeout fault", err, err)
	}
	for _, want := range []string{"did not finish within build.timeout (10s)", "raise build.timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	t.Logf("%v", err)
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the compiler never started its child: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	// SIGKILL is sent to the group before Build returns; a child busy on
	// a loaded machine may take a moment to be gone. One that sleeps on
	// for seconds was never sent it. (With pid_max at 32768, a busy
	// machine may give the pid to another program: not the child.)
	gone := func(state string) bool { return state == "" || state == "Z" || state == "X" }
	state := processState(pid, "sleep")
	for deadline := time.Now().Add(5 * time.Second); !gone(state) && time.Now().Before(deadline); state = processState(pid, "sleep") {
		time.Sleep(50 * time.Millisecond)
	}
	if !gone(state) {
		t.Errorf("the compiler's child %d is still running (state %s): the process group was not killed", pid, state)
	}
}

func TestBuildTimeoutIsWrittenAsInTheJobFile(t *testing.T) {
	for d, want := range map[time.Duration]string{3 * time.Hour: "3h", 90 * time.Minute: "1h30m", 10 * time.Second: "10s", 90 * time.Second: "1m30s", time.Minute: "1m"} {
		if got := durationText(d); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
	}
}

// TestTheSlotsWorktreeLockIsWaitedForOnlyUntilItsDeadline: another
// kbisect that hangs while it holds the lock of the slots' worktrees
// stops this one's wait at the deadline, with the lock's path; a
// cancelled run stops waiting at once; a free lock is taken.
func TestTheSlotsWorktreeLockIsWaitedForOnlyUntilItsDeadline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "worktree.lock")
	other, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = waitLock(context.Background(), f, 300*time.Millisecond)
	if want := path + " has been held by another kbisect for more than 300ms"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v, want %q…", err, want)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waitLock(cancelled, f, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled run: %v", err)
	}
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if err := waitLock(context.Background(), f, time.Hour); err != nil {
		t.Errorf("a free lock: %v", err)
	}
}

// processState is the state letter /proc gives a process running comm
// ("" when it is gone, or the pid is another program's now).
func processState(pid int, comm string) string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	s := string(data)
	if !strings.Contains(s, " ("+comm+") ") {
		return "" // the pid is another program's now
	}
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return ""
}
