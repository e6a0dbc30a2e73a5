// Package lab turns a commit into a verdict. This file holds the simplest
// lab, the one of `git bisect run`: check the commit out in a work tree and
// run a command there.
package lab

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
	"kbisect/worktree"
)

// ExecAbortError is a test command whose exit status means "stop the
// bisection" in git bisect run's convention (above 127, or killed).
type ExecAbortError struct {
	Commit  plumbing.Hash
	Command string
	Exit    int
	Signal  string
}

func (e *ExecAbortError) Error() string {
	if e.Signal != "" {
		return fmt.Sprintf("test command %q was killed by %s on %s: bisection aborted", e.Command, e.Signal, e.Commit)
	}
	return fmt.Sprintf("test command %q exited %d on %s (above 127 means abort): bisection aborted", e.Command, e.Exit, e.Commit)
}

// ExecTester checks each commit out in Tree and runs Command there with
// `sh -c`, mapping its exit status as git bisect run does: 0 good, 125 skip,
// 1–127 bad, anything else aborts.
type ExecTester struct {
	Tree    *worktree.Tree
	Command string
	Stdout  io.Writer
	Stderr  io.Writer
	// KillGrace is how long the command's process group gets between
	// SIGTERM and SIGKILL when the bisection is cancelled.
	KillGrace time.Duration
}

// Test implements bisect.TestFunc.
func (t *ExecTester) Test(ctx context.Context, commit plumbing.Hash) (bisect.Outcome, error) {
	if err := t.Tree.Checkout(ctx, commit.String()); err != nil {
		return bisect.Outcome{}, fmt.Errorf("check out %s: %w", commit, err)
	}
	code, sig, err := t.run(ctx, commit)
	if err != nil {
		return bisect.Outcome{}, err
	}
	if sig != "" {
		return bisect.Outcome{}, &ExecAbortError{Commit: commit, Command: t.Command, Exit: -1, Signal: sig}
	}
	out := bisect.Outcome{ExitCode: &code, Note: fmt.Sprintf("exit %d", code)}
	switch {
	case code == 0:
		out.Verdict = bisect.Good
	case code == 125:
		out.Verdict = bisect.Skip
	case code >= 1 && code <= 127:
		out.Verdict = bisect.Bad
	default:
		return bisect.Outcome{}, &ExecAbortError{Commit: commit, Command: t.Command, Exit: code}
	}
	return out, nil
}

// run starts the command in its own process group, so that a cancelled
// bisection stops everything it started, not just the shell.
func (t *ExecTester) run(ctx context.Context, commit plumbing.Hash) (int, string, error) {
	cmd := exec.Command("/bin/sh", "-c", t.Command)
	cmd.Dir = t.Tree.Dir
	cmd.Env = append(os.Environ(), "KBISECT_COMMIT="+commit.String())
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = t.Stdout, t.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, "", fmt.Errorf("start test command: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		grace := t.KillGrace
		if grace <= 0 {
			grace = 5 * time.Second
		}
		select {
		case <-done:
		case <-time.After(grace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
		}
		return 0, "", ctx.Err()
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
