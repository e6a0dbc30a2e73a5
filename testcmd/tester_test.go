package testcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/verdict"
	"kbisect/worktree"
)

func oneCommitTree(t *testing.T) (*worktree.Tree, plumbing.Hash) {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q"},
		{"-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "only"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	tree, err := worktree.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	head, err := tree.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tree, plumbing.NewHash(head.Commit)
}

func TestTesterMapsExitCodesAsGitBisectRun(t *testing.T) {
	tree, commit := oneCommitTree(t)
	for _, c := range []struct {
		cmd   string
		want  verdict.Verdict
		abort bool
	}{
		{"exit 0", verdict.Good, false},
		{"exit 1", verdict.Bad, false},
		{"exit 124", verdict.Bad, false},
		{"exit 125", verdict.Skip, false},
		{"exit 126", verdict.Bad, false},
		{"exit 127", verdict.Bad, false},
		{"no-such-command-anywhere", verdict.Bad, false}, // the shell says 127
		{"exit 128", "", true},
		{"exit 255", "", true},
		{"kill -TERM $$", "", true},
	} {
		var out bytes.Buffer
		tester := &Tester{Tree: tree, Command: c.cmd, Stdout: &out, Stderr: &out}
		got, err := tester.Test(context.Background(), commit)
		var abort *AbortError
		if c.abort {
			if !errors.As(err, &abort) {
				t.Errorf("%q: got %v, %v; want an abort", c.cmd, got.Verdict, err)
			}
			continue
		}
		if err != nil || got.Verdict != c.want {
			t.Errorf("%q: got %v, %v; want %v", c.cmd, got.Verdict, err, c.want)
		}
	}
}

func TestTesterRunsInTheTreeWithTheCommitInItsEnvironment(t *testing.T) {
	tree, commit := oneCommitTree(t)
	var out bytes.Buffer
	tester := &Tester{Tree: tree, Command: `echo "$KBISECT_COMMIT $(pwd)"`, Stdout: &out, Stderr: os.Stderr}
	if _, err := tester.Test(context.Background(), commit); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(out.String()), commit.String()+" "+tree.Dir; got != want {
		t.Errorf("command saw %q, want %q", got, want)
	}
}

func TestTesterStopsTheWholeProcessGroupOnCancel(t *testing.T) {
	pid, err := cancelWhileRunning(t, "sleep 300 & echo $! > %s; wait", time.Second)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Test after cancel: %v", err)
	}
	if !goneSoon(pid, 2*time.Second) {
		t.Errorf("the command's child %s survived the cancel", pid)
	}
}

// cancelWhileRunning starts a test command (a format with %s for a file
// where it writes the pid of a child), cancels the test once the child
// runs, and returns that pid and the test's error.
func cancelWhileRunning(t *testing.T, command string, grace time.Duration) (string, error) {
	t.Helper()
	tree, commit := oneCommitTree(t)
	pidFile := t.TempDir() + "/child"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tester := &Tester{Tree: tree, Command: fmt.Sprintf(command, pidFile), Stdout: os.Stderr, Stderr: os.Stderr, KillGrace: grace}
	done := make(chan error, 1)
	go func() {
		_, err := tester.Test(ctx, commit)
		done <- err
	}()
	var pid string
	for pid == "" {
		data, _ := os.ReadFile(pidFile)
		pid = strings.TrimSpace(string(data))
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let the child set its traps
	cancel()
	return pid, <-done
}

// goneSoon waits for a process to end (gone, or a zombie).
func goneSoon(pid string, within time.Duration) bool {
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return true
		}
	}
	return false
}

func TestTesterRefusesACommandThatCannotRun(t *testing.T) {
	tree, commit := oneCommitTree(t)
	good := func() plumbing.Hash { return commit }
	tester := &Tester{Tree: tree, Command: "./no-such-script", Stdout: os.Stderr, Stderr: os.Stderr, Good: good}
	_, err := tester.Test(context.Background(), commit)
	var broken *BrokenCommandError
	if !errors.As(err, &broken) || broken.Exit != 127 || !strings.Contains(err.Error(), "command not found") {
		t.Fatalf("a missing script: %v", err)
	}

	// A real 127 from the commit, with the good revision passing, is bad.
	marker := t.TempDir() + "/seen"
	tester = &Tester{Tree: tree, Command: "test -e " + marker + " && exit 0; touch " + marker + "; exit 127", Stdout: os.Stderr, Stderr: os.Stderr, Good: good}
	out, err := tester.Test(context.Background(), commit)
	if err != nil || out.Verdict != verdict.Bad {
		t.Fatalf("127 from the commit: %v, %v", out.Verdict, err)
	}

	// As in git, the check happens the first time 126 or 127 appears, even
	// after other verdicts.
	tester = &Tester{Tree: tree, Command: "test -e " + marker + ".2 || { touch " + marker + ".2; exit 1; }; exit 126", Stdout: os.Stderr, Stderr: os.Stderr, Good: good}
	if out, err := tester.Test(context.Background(), commit); err != nil || out.Verdict != verdict.Bad {
		t.Fatalf("first run: %v %v", out.Verdict, err)
	}
	if _, err := tester.Test(context.Background(), commit); !errors.As(err, &broken) || broken.Exit != 126 {
		t.Fatalf("a 126 on the second run was not verified: %v", err)
	}
}

func TestTesterKillsChildrenThatOutliveTheShell(t *testing.T) {
	// The child ignores SIGTERM; the shell dies of it.
	pid, _ := cancelWhileRunning(t, `sh -c 'trap "" TERM; exec sleep 300' & echo $! > %s; wait`, 300*time.Millisecond)
	if !goneSoon(pid, 3*time.Second) {
		t.Errorf("the child %s that ignores SIGTERM survived", pid)
	}
}
