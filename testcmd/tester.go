// Package testcmd runs the user's test command on each candidate as git
// bisect run does: the commit checked out in the user's work tree, the
// exit status mapped to good, bad, skip or abort, the command in a process
// group of its own or, on a terminal, in the terminal's foreground, and a
// command left running by a killed kbisect stopped when the run resumes.
//
// It imports bisect (its outcomes), verdict, worktree (the checkout) and
// internal/shell (the -v trace), and no package of the lab: the test
// command is kbisect's simplest lab, one a laptop can run.
package testcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/internal/shell"
	"kbisect/verdict"
	"kbisect/worktree"
)

// AbortError is a test command whose exit status means "stop the
// bisection" in git bisect run's convention (above 127, or killed).
type AbortError struct {
	Commit  plumbing.Hash
	Command string
	Exit    int
	Signal  string
}

func (e *AbortError) Error() string {
	if e.Signal != "" {
		return fmt.Sprintf("test command %q was killed by %s on %s: bisection aborted", e.Command, e.Signal, e.Commit)
	}
	return fmt.Sprintf("test command %q exited %d on %s (above 127 means abort): bisection aborted", e.Command, e.Exit, e.Commit)
}

// Tester checks each commit out in Tree and runs Command there with
// `sh -c`, mapping its exit status as git bisect run does: 0 good, 125 skip,
// 1–127 bad, anything else aborts.
type Tester struct {
	Tree    *worktree.Tree
	Command string
	Stdout  io.Writer
	Stderr  io.Writer
	// KillGrace is how long the command's process group gets between
	// SIGTERM and SIGKILL when the bisection is cancelled.
	KillGrace time.Duration
	// Good returns a revision known good at the time of the call. The
	// first time the command exits 126 or 127, which is also what a shell
	// says when it cannot run or find a command, the command is run on that
	// revision too: the same status there means the command is broken, not
	// the commit, and the bisection aborts instead of marking every commit
	// bad (as git bisect run does).
	Good func() plumbing.Hash
	// PIDFile, when set, names the test command's process while it runs,
	// so that a run resumed after kbisect was killed can stop a test left
	// running in the tree (StopLeftover).
	PIDFile string

	verified bool
}

// BrokenCommandError is a test command that fails the same way on a
// commit known to be good: it cannot be what decides.
type BrokenCommandError struct {
	Command string
	Exit    int
	Good    plumbing.Hash
}

func (e *BrokenCommandError) Error() string {
	why := "is it executable?"
	if e.Exit == 127 {
		why = "command not found?"
	}
	return fmt.Sprintf("test command %q exits %d on the good revision %s too (%s): fix the command; no verdict was recorded", e.Command, e.Exit, e.Good, why)
}

// Test implements bisect.TestFunc.
func (t *Tester) Test(ctx context.Context, commit plumbing.Hash) (bisect.Outcome, error) {
	if err := t.Tree.Checkout(ctx, commit.String()); err != nil {
		return bisect.Outcome{}, fmt.Errorf("check out %s: %w", commit, err)
	}
	code, sig, err := t.run(ctx, commit)
	if err != nil {
		return bisect.Outcome{}, err
	}
	if sig != "" {
		return bisect.Outcome{}, &AbortError{Commit: commit, Command: t.Command, Exit: -1, Signal: sig}
	}
	if (code == 126 || code == 127) && !t.verified && t.Good != nil {
		t.verified = true
		if good := t.Good(); !good.IsZero() {
			if err := t.verifyGood(ctx, code, commit, good); err != nil {
				return bisect.Outcome{}, err
			}
		}
	}
	out := bisect.Outcome{ExitCode: &code, Note: fmt.Sprintf("exit %d", code)}
	switch {
	case code == 0:
		out.Verdict = verdict.Good
	case code == 125:
		out.Verdict = verdict.Skip
	case code >= 1 && code <= 127:
		out.Verdict = verdict.Bad
	default:
		return bisect.Outcome{}, &AbortError{Commit: commit, Command: t.Command, Exit: code}
	}
	return out, nil
}

// stopGroup ends the command's process group: SIGTERM, then SIGKILL to
// whatever is left of the group after the grace period, even when the
// shell itself is gone and only its children linger.
func (t *Tester) stopGroup(pgid int, done <-chan error) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.After(t.grace())
	select {
	case <-done:
	case <-deadline:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
		return
	}
	for syscall.Kill(-pgid, 0) == nil {
		select {
		case <-deadline:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// verifyGood runs the command on the good revision, then goes back.
func (t *Tester) verifyGood(ctx context.Context, code int, commit, good plumbing.Hash) error {
	if err := t.Tree.Checkout(ctx, good.String()); err != nil {
		return fmt.Errorf("check out the good revision %s to verify the test command: %w", good, err)
	}
	goodCode, sig, err := t.run(ctx, good)
	if err != nil {
		return err
	}
	if err := t.Tree.Checkout(ctx, commit.String()); err != nil {
		return fmt.Errorf("check out %s: %w", commit, err)
	}
	if sig != "" || goodCode >= 128 {
		return &AbortError{Commit: good, Command: t.Command, Exit: goodCode, Signal: sig}
	}
	if goodCode == code {
		return &BrokenCommandError{Command: t.Command, Exit: code, Good: good}
	}
	return nil
}

// run starts the command. Without a terminal (CI, cron, nohup) it runs in
// a process group of its own, so that a cancelled bisection stops
// everything it started. On a terminal it stays in kbisect's group, as
// under git bisect run: Ctrl-C and Ctrl-Z reach the whole job, the shell's
// job control works, and a test that asks on /dev/tty (sudo, ssh) gets the
// terminal.
func (t *Tester) run(ctx context.Context, commit plumbing.Hash) (int, string, error) {
	if err := ctx.Err(); err != nil {
		return 0, "", err
	}
	shell.Trace(ctx, "", t.Command)
	cmd := exec.Command("/bin/sh", "-c", t.Command)
	cmd.Dir = t.Tree.Dir
	cmd.Env = append(os.Environ(), "KBISECT_COMMIT="+commit.String())
	cmd.Stdout, cmd.Stderr = t.Stdout, t.Stderr
	onTerminal := hasTerminal()
	if onTerminal {
		cmd.Stdin = os.Stdin
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		return 0, "", fmt.Errorf("start test command: %w", err)
	}
	if t.PIDFile != "" {
		if err := writeLeftover(t.PIDFile, cmd.Process.Pid, !onTerminal); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return 0, "", err
		}
		defer os.Remove(t.PIDFile)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		if onTerminal {
			t.stopProcess(cmd.Process.Pid, done)
		} else {
			t.stopGroup(cmd.Process.Pid, done)
		}
		return 0, "", ctx.Err()
	}
	if onTerminal {
		// Ctrl-C reaches the test and kbisect together; a test that
		// catches it and exits must not become a verdict. Give kbisect's
		// own signal handling a moment to cancel the context.
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, "", err
	}
	if err == nil {
		return 0, "", nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, "", fmt.Errorf("test command: %w", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 0, ws.Signal().String(), nil
	}
	return ee.ExitCode(), "", nil
}

// stopProcess ends a test command that shares kbisect's process group,
// and everything it started: SIGTERM to the tree, SIGKILL to what is left
// of it after the grace period.
func (t *Tester) stopProcess(pid int, done <-chan error) {
	tree := processTree(pid)
	signalAll(tree, syscall.SIGTERM)
	deadline := time.Now().Add(t.grace())
	for alive(tree) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	signalAll(tree, syscall.SIGKILL)
	<-done
}

func (t *Tester) grace() time.Duration {
	if t.KillGrace > 0 {
		return t.KillGrace
	}
	return 5 * time.Second
}
