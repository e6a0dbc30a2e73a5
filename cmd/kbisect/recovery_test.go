package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestRunInterruptedPutsHeadBack(t *testing.T) {
	f := newFixture(t, 5)
	started := filepath.Join(t.TempDir(), "started")
	ctx := cancelWhenWritten(t, started)
	code, _, stderr := runCLI(t, ctx, "run", "--repo", f.dir, "--good", f.good, "--bad", f.bad,
		"--exec", fmt.Sprintf("touch %s; exec sleep 60", started))
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d\n%s", code, exitInterrupted, stderr)
	}
	if head := f.git(t, "symbolic-ref", "HEAD"); head != "refs/heads/master" {
		t.Errorf("HEAD is %s after Ctrl-C, want refs/heads/master", head)
	}
	if st := f.git(t, "status", "--porcelain"); st != "" {
		t.Errorf("tree not clean after Ctrl-C: %s", st)
	}
}

// TestRunResumesAfterKill9 kills the kbisect process in the middle of a
// step, then runs the same command again: no verdict is lost, only the
// interrupted step is repeated, and HEAD ends where it began.
func TestRunResumesAfterKill9(t *testing.T) {
	f := newFixture(t, 7)
	want := f.gitBisectTested(t)
	bin := buildKbisect(t)
	script := f.killedAtThirdTest(t)
	// --bad HEAD: after the kill HEAD names the commit under test, and the
	// same command must still find its run.
	args := []string{"run", "--repo", f.dir, "--good", f.good, "--bad", "HEAD", "--exec", script}

	first := exec.Command(bin, args...)
	out, err := first.CombinedOutput()
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("first run was not killed: %v\n%s", err, out)
	}
	// Another command while the interrupted run holds the tree: refused,
	// with what to do.
	other := exec.Command(bin, "run", "--repo", f.dir, "--good", f.good, "--bad", "HEAD", "--exec", "true")
	out, err = other.CombinedOutput()
	if code := exitStatus(err); code != exitUsage || !strings.Contains(string(out), "interrupted kbisect run") || !strings.Contains(string(out), "git checkout master") {
		t.Errorf("another command during an interrupted run: exit %d\n%s", code, out)
	}

	second := exec.Command(bin, args...)
	out, err = second.CombinedOutput()
	if err != nil {
		t.Fatalf("resumed run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "resuming the interrupted run") || !strings.Contains(string(out), f.culprit+" is the first bad commit") {
		t.Errorf("resumed run output:\n%s", out)
	}
	got := f.tested(t)
	// The killed step is tested twice; every other step once, in git's order.
	wantCalls := append(append(append([]string{}, want[:3]...), want[2]), want[3:]...)
	if strings.Join(got, " ") != strings.Join(wantCalls, " ") {
		t.Errorf("test command calls\n got %v\nwant %v", got, wantCalls)
	}
	if head := f.git(t, "symbolic-ref", "HEAD"); head != "refs/heads/master" {
		t.Errorf("HEAD is %s after the resumed run", head)
	}
}

// forkRepo makes master A-X-M and a branch "fixed" forked at X with one
// commit G: X brought the bug, G fixed it on its branch.
func exitStatus(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// buildKbisect builds the command once for the tests that need a real
// process (to kill it, or to give it a terminal).
// TestRunGivesTheTestCommandTheTerminal runs kbisect on a pseudo-terminal
// (script(1)) with a test command that reads its answer from /dev/tty, as a
// sudo password prompt does: it must get the input, not be stopped for
// reading from a background process group.
func TestRunGivesTheTestCommandTheTerminal(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Fatal("script(1) from util-linux is needed for the terminal test")
	}
	f := newFixture(t, 11)
	bin := buildKbisect(t)
	test := `c=$(head -c1 /dev/tty) && [ "$c" = y ] && grep -q good state`
	line := fmt.Sprintf("%s run --repo %s --good %s --bad %s --exec %s", bin, f.dir, f.good, f.bad, sqQuoteShell(test))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "-qec", line, "/dev/null")
	cmd.Stdin = strings.NewReader(strings.Repeat("y", 64) + "\n")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("kbisect hung: the test command could not read the terminal\n%s", out)
	}
	if err != nil || !strings.Contains(string(out), f.culprit+" is the first bad commit") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestRunCtrlCOnATerminalRecordsNoVerdict: on a terminal, Ctrl-C reaches
// the test command and kbisect together; a test that catches it and exits
// 1 must not become a "bad" verdict.
func TestRunCtrlCOnATerminalRecordsNoVerdict(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Fatal("script(1) from util-linux is needed for the terminal test")
	}
	f := newFixture(t, 12)
	bin := buildKbisect(t)
	started := filepath.Join(t.TempDir(), "started")
	state := filepath.Join(t.TempDir(), "state")
	// The hardest case: the test catches ^C and says "good".
	test := fmt.Sprintf(`trap "exit 0" INT; touch %s; sleep 20 & wait; grep -q good state`, started)
	line := fmt.Sprintf("%s run --repo %s --good %s --bad %s --state %s --exec %s", bin, f.dir, f.good, f.bad, state, sqQuoteShell(test))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "-qec", line, "/dev/null")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitForPath(started, 30*time.Second) {
		t.Fatalf("the test never started\n%s", out.String())
	}
	stdin.Write([]byte{3}) // ^C on the terminal
	err = cmd.Wait()
	stdin.Close()
	if code := exitStatus(err); code != exitInterrupted {
		t.Errorf("exit %d, want %d\n%s", code, exitInterrupted, out.String())
	}
	data, _ := os.ReadFile(filepath.Join(state, "session.jsonl"))
	if strings.Contains(string(data), `"event":"verdict"`) {
		t.Errorf("a verdict was recorded for an interrupted test:\n%s", data)
	}
	if head := f.git(t, "symbolic-ref", "HEAD"); head != "refs/heads/master" {
		t.Errorf("HEAD is %s after Ctrl-C", head)
	}
}

func TestRunStopsATestLeftRunningByAKilledRun(t *testing.T) {
	f := newFixture(t, 14)
	bin := buildKbisect(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The first test records its pid and sleeps; kbisect is killed meanwhile.
	test := fmt.Sprintf(`if [ ! -e %[1]s ]; then echo $$ > %[1]s; sleep 60; fi; grep -q good state`, pidFile)
	args := []string{"run", "--repo", f.dir, "--good", f.good, "--bad", f.bad, "--exec", test}
	first := exec.Command(bin, args...)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	pid, _ := waitForFile(pidFile, 10*time.Second)
	// kbisect records the test it started just after starting it: kill
	// it once that record is there (a kill between the two cannot be
	// recovered from, and is not what this tests).
	if !waitForGlob(filepath.Join(f.dir, ".git", "kbisect", "run-*", "test.pid"), 10*time.Second) {
		t.Fatal("kbisect never recorded the test it started")
	}
	first.Process.Kill()
	first.Wait()
	if _, err := os.Stat("/proc/" + pid); err != nil {
		t.Fatalf("the test was not left running (%v): nothing to check", err)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "stopped the test command the interrupted run left running") {
		t.Fatalf("%v\n%s", err, out)
	}
	if !processGone(pid, 0) {
		t.Errorf("the leftover test %s still runs", pid)
	}
}

func TestRunSaysWhatToDoWhenAnInterruptedRunLostItsState(t *testing.T) {
	f := newFixture(t, 15)
	state := filepath.Join(t.TempDir(), "state")
	f.git(t, "checkout", "-q", "--detach", f.bad+"~3")
	marker := filepath.Join(f.dir, ".git", "kbisect", "RUNNING")
	os.MkdirAll(filepath.Dir(marker), 0o755)
	os.WriteFile(marker, []byte(`{"state":"`+state+`","head_branch":"refs/heads/master","head_commit":"`+f.bad+`"}`+"\n"), 0o644)
	code, _, stderr := runCLI(t, context.Background(), "run", "--repo", f.dir, "--good", f.good, "--bad", "HEAD", "--exec", f.script)
	if code != exitFailure || !strings.Contains(stderr, "is gone") || !strings.Contains(stderr, "git checkout master") || len(f.tested(t)) != 0 {
		t.Errorf("exit %d, tested %d: %s", code, len(f.tested(t)), stderr)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the marker was dropped: %v", err)
	}
}

// TestRunUnderAClosedPipeRecordsNoWrongVerdict: with `kbisect … | head -1`
// the test command's output goes to a closed pipe. As under git bisect run
// it must die of SIGPIPE (an abort), not see EPIPE and fail as "bad".
func TestRunUnderAClosedPipeRecordsNoWrongVerdict(t *testing.T) {
	f := newFixture(t, 16)
	bin := buildKbisect(t)
	state := filepath.Join(t.TempDir(), "state")
	test := `set -e; for i in 1 2 3 4 5 6 7 8 9 10; do echo checking; done; grep -q good state`
	line := fmt.Sprintf("%s run --repo %s --good %s --bad %s --state %s --exec %s | head -1", bin, f.dir, f.good, f.bad, state, sqQuoteShell(test))
	if out, err := exec.Command("sh", "-c", line).CombinedOutput(); err != nil {
		t.Logf("%v %s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(state, "session.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec struct{ Event, Commit, Verdict string }
		json.Unmarshal([]byte(line), &rec)
		if rec.Event != "verdict" {
			continue
		}
		truth := "bad"
		if strings.Contains(f.git(t, "show", rec.Commit+":state"), "good") {
			truth = "good"
		}
		if rec.Verdict != truth {
			t.Errorf("%s recorded %s, it is %s", rec.Commit, rec.Verdict, truth)
		}
	}
	if head := f.git(t, "symbolic-ref", "HEAD"); head != "refs/heads/master" {
		t.Errorf("HEAD is %s", head)
	}
}

// TestRunUnderNohupIgnoresHangups: a SIGHUP the caller ignores (nohup)
// must not stop the run.
func TestRunUnderNohupIgnoresHangups(t *testing.T) {
	f := newFixture(t, 17)
	bin := buildKbisect(t)
	pidFile := filepath.Join(t.TempDir(), "kbisect.pid")
	test := fmt.Sprintf(`echo $PPID > %s; sleep 0.3; grep -q good state`, pidFile)
	cmd := exec.Command("sh", "-c", fmt.Sprintf(`trap "" HUP; exec %s run --repo %s --good %s --bad %s --exec %s`, bin, f.dir, f.good, f.bad, sqQuoteShell(test)))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	text, _ := waitForFile(pidFile, 10*time.Second)
	pid, _ := strconv.Atoi(text)
	syscall.Kill(pid, syscall.SIGHUP)
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), f.culprit+" is the first bad commit") {
		t.Errorf("a hang-up under nohup stopped the run: %v\n%s", err, out.String())
	}
}

// TestRunPutsHeadBackWhereThisRunStarted: a resumed run goes back to the
// branch it was started from, not to the first run's.
func TestRunPutsHeadBackWhereThisRunStarted(t *testing.T) {
	f := newFixture(t, 18)
	f.git(t, "checkout", "-q", "-b", "feature")
	started := filepath.Join(t.TempDir(), "started")
	ctx := cancelWhenWritten(t, started)
	test := fmt.Sprintf(`if [ ! -e %[1]s ]; then touch %[1]s; sleep 30; fi; grep -q good state`, started)
	if code, _, stderr := runCLI(t, ctx, "run", "--repo", f.dir, "--good", f.good, "--bad", f.bad, "--exec", test); code != exitInterrupted {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	f.git(t, "checkout", "-q", "master")
	f.git(t, "branch", "-D", "feature")
	code, stdout, stderr := runCLI(t, context.Background(), "run", "--repo", f.dir, "--good", f.good, "--bad", f.bad, "--exec", test)
	if code != exitOK || !strings.Contains(stdout, f.culprit) || !strings.Contains(stderr, "resuming") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if head := f.git(t, "symbolic-ref", "HEAD"); head != "refs/heads/master" {
		t.Errorf("HEAD is %s, want master where this run started", head)
	}
}

// TestRunOnATerminalStopsTheTestsChildrenWhenKilled: in terminal mode the
// test shares kbisect's process group, so a SIGTERM to kbisect alone must
// still end what the test started.
func TestRunOnATerminalStopsTheTestsChildrenWhenKilled(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Fatal("script(1) from util-linux is needed for the terminal test")
	}
	f := newFixture(t, 19)
	bin := buildKbisect(t)
	pids := filepath.Join(t.TempDir(), "pids")
	test := fmt.Sprintf(`sleep 60 & echo "$PPID $!" > %s; wait`, pids)
	line := fmt.Sprintf("%s run --repo %s --good %s --bad %s --exec %s", bin, f.dir, f.good, f.bad, sqQuoteShell(test))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "-qec", line, "/dev/null")
	stdin, _ := cmd.StdinPipe()
	defer stdin.Close()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	text, ok := waitForFile(pids, 20*time.Second)
	var kb, child int
	if _, err := fmt.Sscanf(text, "%d %d", &kb, &child); !ok || err != nil {
		t.Fatalf("the test never started\n%s", out.String())
	}
	syscall.Kill(kb, syscall.SIGTERM)
	cmd.Wait()
	if !processGone(strconv.Itoa(child), 6*time.Second) {
		t.Errorf("the test's child %d outlived kbisect\n%s", child, out.String())
	}
	if head := f.git(t, "symbolic-ref", "HEAD"); head != "refs/heads/master" {
		t.Errorf("HEAD is %s", head)
	}
}

// waitForFile returns the trimmed content of path once something is
// written there, or false when nothing is within the time given.
func waitForFile(path string, within time.Duration) (string, bool) {
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if data, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(data)) > 0 {
			return strings.TrimSpace(string(data)), true
		}
	}
	return "", false
}

// waitForGlob reports whether a file matching pattern exists within the
// time given.
func waitForGlob(pattern string, within time.Duration) bool {
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return true
		}
	}
	return false
}

// waitForPath reports whether path exists within the time given.
func waitForPath(path string, within time.Duration) bool {
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
	}
	return false
}

// cancelWhenWritten returns a context cancelled, as by Ctrl-C, once the
// test command has written path.
func cancelWhenWritten(t *testing.T, path string) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		if waitForPath(path, time.Minute) {
			cancel()
		}
	}()
	return ctx
}

// processGone reports whether pid has ended (gone, or a zombie) within the
// time given; 0 checks once.
func processGone(pid string, within time.Duration) bool {
	end := time.Now().Add(within)
	for {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return true
		}
		if !time.Now().Before(end) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sqQuoteShell quotes s for sh in single quotes, always.
func sqQuoteShell(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestRunAfterAKillAndACheckoutGoesOn: a user who puts HEAD back on a
// branch after a killed run has taken the tree back; the same command
// then resumes the run's verdicts by its range, without a word about a
// detached HEAD.
func TestRunAfterAKillAndACheckoutGoesOn(t *testing.T) {
	f := newFixture(t, 7)
	want := f.gitBisectTested(t)
	bin := buildKbisect(t)
	script := f.killedAtThirdTest(t)
	args := []string{"run", "--repo", f.dir, "--good", f.good, "--bad", f.bad, "--exec", script}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("first run was not killed: %v\n%s", err, out)
	}
	f.git(t, "checkout", "-q", "master")
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("after the checkout: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "kbisect: HEAD is on master again since a run was interrupted; its verdicts stay in ") ||
		!strings.Contains(string(out), "kbisect: resuming from ") || strings.Contains(string(out), "detached") ||
		!strings.Contains(string(out), f.culprit+" is the first bad commit") {
		t.Errorf("after the checkout:\n%s", out)
	}
	if got := f.tested(t); len(got) != len(want)+1 {
		t.Errorf("%d test runs, want %d (git's steps and the killed one again): %v", len(got), len(want)+1, got)
	}
	if head := f.git(t, "symbolic-ref", "HEAD"); head != "refs/heads/master" {
		t.Errorf("HEAD is %s after the run", head)
	}
}

// killedAtThirdTest is the fixture's test command, which SIGKILLs kbisect
// (its parent) at the third commit it tests, once.
func (f *fixture) killedAtThirdTest(t *testing.T) string {
	killed := filepath.Join(t.TempDir(), "killed")
	return fmt.Sprintf(`echo "$KBISECT_COMMIT" >> %[1]s
if [ "$(wc -l < %[1]s)" -eq 3 ] && [ ! -e %[2]s ]; then touch %[2]s; kill -9 $PPID; exit 0; fi
grep -q good state`, f.calls, killed)
}
