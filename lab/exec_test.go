package lab

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
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

func TestExecTesterMapsExitCodesAsGitBisectRun(t *testing.T) {
	tree, commit := oneCommitTree(t)
	for _, c := range []struct {
		cmd   string
		want  bisect.Verdict
		abort bool
	}{
		{"exit 0", bisect.Good, false},
		{"exit 1", bisect.Bad, false},
		{"exit 124", bisect.Bad, false},
		{"exit 125", bisect.Skip, false},
		{"exit 126", bisect.Bad, false},
		{"exit 127", bisect.Bad, false},
		{"no-such-command-anywhere", bisect.Bad, false}, // the shell says 127
		{"exit 128", 0, true},
		{"exit 255", 0, true},
		{"kill -TERM $$", 0, true},
	} {
		var out bytes.Buffer
		tester := &ExecTester{Tree: tree, Command: c.cmd, Stdout: &out, Stderr: &out}
		got, err := tester.Test(context.Background(), commit)
		var abort *ExecAbortError
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

func TestExecTesterRunsInTheTreeWithTheCommitInItsEnvironment(t *testing.T) {
	tree, commit := oneCommitTree(t)
	var out bytes.Buffer
	tester := &ExecTester{Tree: tree, Command: `echo "$KBISECT_COMMIT $(pwd)"`, Stdout: &out, Stderr: os.Stderr}
	if _, err := tester.Test(context.Background(), commit); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(out.String()), commit.String()+" "+tree.Dir; got != want {
		t.Errorf("command saw %q, want %q", got, want)
	}
}

func TestExecTesterStopsTheWholeProcessGroupOnCancel(t *testing.T) {
	tree, commit := oneCommitTree(t)
	pidFile := t.TempDir() + "/child"
	ctx, cancel := context.WithCancel(context.Background())
	tester := &ExecTester{Tree: tree, Command: "sleep 300 & echo $! > " + pidFile + "; wait", Stdout: os.Stderr, Stderr: os.Stderr, KillGrace: time.Second}
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
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Test after cancel: %v", err)
	}
	// The grandchild must be gone too (kill -0 fails once it is reaped or a zombie of init).
	for i := 0; i < 200; i++ {
		if _, err := os.Stat("/proc/" + pid); os.IsNotExist(err) {
			return
		}
		if stat, _ := os.ReadFile("/proc/" + pid + "/stat"); strings.Contains(string(stat), ") Z ") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("the command's child %s survived the cancel", pid)
}

func TestExecTesterRefusesACommandThatCannotRun(t *testing.T) {
	tree, commit := oneCommitTree(t)
	good := func() plumbing.Hash { return commit }
	tester := &ExecTester{Tree: tree, Command: "./no-such-script", Stdout: os.Stderr, Stderr: os.Stderr, Good: good}
	_, err := tester.Test(context.Background(), commit)
	var broken *BrokenCommandError
	if !errors.As(err, &broken) || broken.Exit != 127 || !strings.Contains(err.Error(), "command not found") {
		t.Fatalf("a missing script: %v", err)
	}

	// A real 127 from the commit, with the good revision passing, is bad.
	marker := t.TempDir() + "/seen"
	tester = &ExecTester{Tree: tree, Command: "test -e " + marker + " && exit 0; touch " + marker + "; exit 127", Stdout: os.Stderr, Stderr: os.Stderr, Good: good}
	out, err := tester.Test(context.Background(), commit)
	if err != nil || out.Verdict != bisect.Bad {
		t.Fatalf("127 from the commit: %v, %v", out.Verdict, err)
	}

	// As in git, the check happens the first time 126 or 127 appears, even
	// after other verdicts.
	tester = &ExecTester{Tree: tree, Command: "test -e " + marker + ".2 || { touch " + marker + ".2; exit 1; }; exit 126", Stdout: os.Stderr, Stderr: os.Stderr, Good: good}
	if out, err := tester.Test(context.Background(), commit); err != nil || out.Verdict != bisect.Bad {
		t.Fatalf("first run: %v %v", out.Verdict, err)
	}
	if _, err := tester.Test(context.Background(), commit); !errors.As(err, &broken) || broken.Exit != 126 {
		t.Fatalf("a 126 on the second run was not verified: %v", err)
	}
}

func TestExecTesterKillsChildrenThatOutliveTheShell(t *testing.T) {
	tree, commit := oneCommitTree(t)
	pidFile := t.TempDir() + "/child"
	ctx, cancel := context.WithCancel(context.Background())
	// The child ignores SIGTERM; the shell dies of it.
	tester := &ExecTester{Tree: tree, Command: "sh -c 'trap \"\" TERM; exec sleep 300' & echo $! > " + pidFile + "; wait", Stdout: os.Stderr, Stderr: os.Stderr, KillGrace: 300 * time.Millisecond}
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
	time.Sleep(100 * time.Millisecond) // let the trap be set
	cancel()
	<-done
	for i := 0; i < 300; i++ {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("the child %s that ignores SIGTERM survived", pid)
}
