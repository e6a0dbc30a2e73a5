package kbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// slowCC is a compiler that, while its directory holds a file "block"
// and its environment KBUILD_TEST_BLOCK=1, compiles eventpoll.c as a
// compiler on a loaded machine does: it reads the source, writes part of
// the object, says so (file "ready", its pid in "pid"), waits for
// "block" to go, then writes the whole object of the source it read.
// Everything else it compiles at once.
func slowCC(t *testing.T) (cc, dir string) {
	t.Helper()
	dir = t.TempDir()
	cc = filepath.Join(dir, "cc")
	script := `#!/bin/sh
out=; prev=
for a; do [ "$prev" = -o ] && out=$a; prev=$a; done
case "$*" in
*eventpoll.c*)
	if [ "$KBUILD_TEST_BLOCK" = 1 ] && [ -e DIR/block ]; then
		echo $$ > DIR/pid
		gcc -O2 -c -o DIR/early.o "$prev" || exit 1
		printf 'half an object' > "$out"
		touch DIR/ready
		while [ -e DIR/block ]; do sleep 0.05; done
		exec cp DIR/early.o "$out"
	fi
esac
exec gcc "$@"
`
	if err := os.WriteFile(cc, []byte(strings.ReplaceAll(script, "DIR", dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	return cc, dir
}

// waitFor waits, at most a minute, for path to exist, or for stop to
// say there is no point.
func waitFor(t *testing.T, path string, stop func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if stop != nil && stop() {
			t.Fatalf("gave up waiting for %s", path)
		}
	}
	t.Fatalf("%s did not come in a minute", path)
}

// alive says whether the process of the pid in file path still runs.
func alive(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	// A zombie is dead: this machine's init may be slow to reap it.
	p, ok := readProc(pid)
	if !ok || p.state == 'Z' {
		return false
	}
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	t.Logf("process %d runs: %+v %q", pid, p, cmd)
	return true
}

// reference builds commit in a cache of its own with the plain compiler:
// the kernel it must be.
func reference(t *testing.T, tree, commit string) string {
	t.Helper()
	a, err := Build(context.Background(), buildOptions(t, tree), 0, commit)
	if err != nil {
		t.Fatal(err)
	}
	return a.Signature
}

// TestACancelledBuildLeavesNoHalfWrittenObject: a build ahead that is no
// longer needed is stopped while the compiler has written part of an
// object. make is told to stop as by Ctrl-C, so it deletes the object it
// was writing; the next build of the commit in the slot compiles it
// again and makes the right kernel. Killing make outright left the half
// object, newer than its source: the next build linked it and failed,
// and the commit would have been taken for one that does not build.
func TestACancelledBuildLeavesNoHalfWrittenObject(t *testing.T) {
	tree, commits := fakeTree(t, map[string]string{"kernel/eventpoll.c": "int ep_poll_callback(void) { return 2; }\n"})
	cc, dir := slowCC(t)
	o := buildOptions(t, tree)
	o.MakeVars = map[string]string{"CC": cc}
	if _, err := Build(context.Background(), o, 0, commits[0]); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KBUILD_TEST_BLOCK", "1")
	if err := os.WriteFile(filepath.Join(dir, "block"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Build(ctx, o, 0, commits[1])
		done <- err
	}()
	waitFor(t, filepath.Join(dir, "ready"), nil)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled build: %v", err)
	}
	if alive(t, filepath.Join(dir, "pid")) {
		t.Error("the compiler of the cancelled build still runs")
	}
	if err := os.Remove(filepath.Join(dir, "block")); err != nil {
		t.Fatal(err)
	}
	a, err := Build(context.Background(), o, 0, commits[1])
	if err != nil {
		t.Fatalf("the commit's next build: %v", err)
	}
	if want := reference(t, tree, commits[1]); a.Signature != want {
		t.Errorf("the next build made kernel %s, the commit's is %s", a.Signature, want)
	}
}

// TestABuildAKilledKbisectLeftIsSettledBeforeTheNextBuild is the slot of
// a kbisect killed (SIGKILL) while its compiler works on an object: the
// next kbisect's build there must not run beside what is left of it, nor
// link what it wrote. Before, make went on without its kbisect and wrote
// the killed build's object after the next build had checked out and
// compiled another commit: a later commit sharing that source then linked
// the killed commit's object, and its kernel was cached under its name.
func TestABuildAKilledKbisectLeftIsSettledBeforeTheNextBuild(t *testing.T) {
	tree, commits := fakeTree(t,
		map[string]string{"kernel/eventpoll.c": "int ep_poll_callback(void) { return 2; }\n"},                                                        // the killed build's
		map[string]string{"kernel/eventpoll.c": "int ep_poll_callback(void) { return 1; }\n", "kernel/helper.c": "int helper(void) { return 5; }\n"}, // the next
		map[string]string{"kernel/helper.c": "int helper(void) { return 6; }\n"})                                                                     // the same eventpoll.c
	cc, dir := slowCC(t)
	o := buildOptions(t, tree)
	o.MakeVars = map[string]string{"CC": cc}
	if _, err := Build(context.Background(), o, 0, commits[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "block"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestHelperBuildOfAKbisectToKill$")
	child.Env = append(os.Environ(), "KBUILD_TEST_BLOCK=1", "KBUILD_TEST_HELPER=1", "KBUILD_TEST_TREE="+tree, "KBUILD_TEST_CACHE="+o.CacheDir,
		"KBUILD_TEST_FRAGMENT="+o.Fragments[0], "KBUILD_TEST_CC="+cc, "KBUILD_TEST_COMMIT="+commits[1])
	var out bytes.Buffer
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = child.Wait(); close(exited) }()
	waitFor(t, filepath.Join(dir, "ready"), func() bool {
		select {
		case <-exited:
			t.Logf("the helper ended:\n%s", out.String())
			return true
		default:
			return false
		}
	})
	_ = child.Process.Kill()
	<-exited

	var log bytes.Buffer
	o.Log = &log
	if _, err := Build(context.Background(), o, 0, commits[2]); err != nil {
		t.Fatal(err)
	}
	if alive(t, filepath.Join(dir, "pid")) {
		t.Error("the killed kbisect's compiler still ran after the next build")
	}
	if !strings.Contains(log.String(), "a build there did not end") {
		t.Errorf("the build log does not say the slot was settled:\n%s", log.String())
	}
	// What is left of the killed build, if anything, goes on now.
	_ = os.Remove(filepath.Join(dir, "block"))
	for deadline := time.Now().Add(30 * time.Second); alive(t, filepath.Join(dir, "pid")) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	o.Log = nil
	a, err := Build(context.Background(), o, 0, commits[3])
	if err != nil {
		t.Fatal(err)
	}
	if want := reference(t, tree, commits[3]); a.Signature != want {
		t.Errorf("the commit after made kernel %s, its own is %s: an object of the killed build was linked", a.Signature, want)
	}
}

// TestHelperBuildOfAKbisectToKill is the kbisect the test above kills:
// it builds a commit in the test's slot, nothing when run by go test.
func TestHelperBuildOfAKbisectToKill(t *testing.T) {
	if os.Getenv("KBUILD_TEST_HELPER") != "1" {
		t.Skip("a helper process of TestABuildAKilledKbisectLeftIsSettledBeforeTheNextBuild")
	}
	o := Options{Tree: os.Getenv("KBUILD_TEST_TREE"), Base: "tinyconfig", Fragments: []string{os.Getenv("KBUILD_TEST_FRAGMENT")}, Jobs: 2,
		CacheDir: os.Getenv("KBUILD_TEST_CACHE"), MakeVars: map[string]string{"CC": os.Getenv("KBUILD_TEST_CC")}}
	_, err := Build(context.Background(), o, 0, os.Getenv("KBUILD_TEST_COMMIT"))
	t.Fatalf("the build was to be killed, it ended: %v", err)
}

// TestSettleEndsTheBuildsProcessesAndNoOther: settling a slot ends the
// processes of the make groups its mark names that work in the slot,
// leaves another process working there alone, and removes the output
// files written since the mark, not those before.
func TestSettleEndsTheBuildsProcessesAndNoOther(t *testing.T) {
	defer func(w, k time.Duration) { settleWait, settleKilled = w, k }(settleWait, settleKilled)
	settleWait, settleKilled = 200*time.Millisecond, 10*time.Second
	base := t.TempDir()
	s := &slot{src: filepath.Join(base, "src"), out: filepath.Join(base, "out")}
	for _, d := range []string{s.src, s.out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := filepath.Join(s.out, "kept.o")
	if err := os.WriteFile(old, []byte("an object of a build that ended"), 0o644); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	if err := s.claim(t.Logf); err != nil {
		t.Fatal(err)
	}
	start := func() *exec.Cmd {
		c := exec.Command("sh", "-c", "trap '' TERM INT; sleep 600 & wait")
		c.Dir = s.src
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL); _ = c.Wait() })
		return c
	}
	build, other := start(), start()
	s.noteMake(build.Process.Pid)
	written := filepath.Join(s.out, "sub", "cut-short.o")
	if err := os.MkdirAll(filepath.Dir(written), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(written, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	var said []string
	if err := s.settle(func(f string, a ...any) { said = append(said, f) }); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { _ = build.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Error("the build's process still runs")
	}
	if !groupGone(build.Process.Pid, 5*time.Second) {
		t.Error("a process of the build's group still runs")
	}
	if syscall.Kill(other.Process.Pid, 0) != nil {
		t.Error("a process that is not the build's was ended")
	}
	if _, err := os.Stat(written); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("what the build wrote is still there: %v", err)
	}
	if _, err := os.Stat(old); err != nil {
		t.Errorf("what an earlier build wrote is gone: %v", err)
	}
	if _, err := os.Stat(s.mark()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mark is still there: %v", err)
	}
	if len(said) != 1 {
		t.Errorf("said %q", said)
	}
	// A slot whose last build ended well has nothing to settle.
	said = nil
	if err := s.settle(func(f string, a ...any) { said = append(said, f) }); err != nil || len(said) != 0 {
		t.Errorf("settling a settled slot: %v %q", err, said)
	}
}
