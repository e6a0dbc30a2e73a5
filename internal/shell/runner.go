package shell

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Runner runs a shell script on the machine under test and returns what
// it printed. A lab host over SSH and this machine (LocalRunner) both
// satisfy it, so the workloads need not know where they run. A script
// that ran and exited non-zero is an *ExitError carrying its output; any
// other error means the runner itself failed (connection lost, cancelled).
type Runner interface {
	Run(ctx context.Context, cmd Cmd) (stdout, stderr []byte, err error)
}

// Cmd is a shell script and the environment variables it needs besides
// the machine's own. Secrets travel in Env so that they are never part of
// the script's text, which is traced and logged.
type Cmd struct {
	Script string
	Env    []string
}

// ExitError is a script that ran and exited with a non-zero status.
type ExitError struct {
	Code   int
	Stderr string
}

func (e *ExitError) Error() string {
	why := strings.TrimSpace(e.Stderr)
	// A failing script's last line of stderr is the one that says why;
	// what came before is its progress.
	if i := strings.LastIndexByte(why, '\n'); i >= 0 {
		why = why[i+1:]
	}
	if why == "" {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return fmt.Sprintf("exit status %d: %s", e.Code, why)
}

// LocalRunner runs scripts on this machine with /bin/sh, each in its own
// process group so that ending the context ends everything it started.
type LocalRunner struct{}

var _ Runner = LocalRunner{}

// Run runs cmd.Script with /bin/sh -c, cmd.Env added to this process's
// environment. A script that prints more than MaxOutput on a stream is
// stopped: an *OutputError.
func (LocalRunner) Run(ctx context.Context, cmd Cmd) ([]byte, []byte, error) {
	Trace(ctx, "", cmd.Script)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := exec.Command("/bin/sh", "-c", cmd.Script)
	c.Env = append(os.Environ(), cmd.Env...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A descendant that left the process group while holding our pipes
	// must not keep Wait from returning once the script has ended.
	c.WaitDelay = 2 * time.Second
	stdout, stderr := NewCapture("stdout", MaxOutput, cancel), NewCapture("stderr", MaxOutput, cancel)
	c.Stdout, c.Stderr = stdout, stderr
	if err := c.Start(); err != nil {
		return nil, nil, err
	}
	waited := make(chan error, 1)
	go func() { waited <- c.Wait() }()
	select {
	case err := <-waited:
		if oe := Overflow(stdout, stderr); oe != nil {
			return stdout.Bytes(), stderr.Bytes(), oe
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = &ExitError{Code: ee.ExitCode(), Stderr: stderr.String()}
		}
		return stdout.Bytes(), stderr.Bytes(), err
	case <-runCtx.Done():
		// SIGTERM first, so that scripts with a trap clean up (the
		// osnoise script puts the tracer back to nop); whatever is left
		// after a grace period is killed.
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-waited
		}
		if oe := Overflow(stdout, stderr); oe != nil {
			return stdout.Bytes(), stderr.Bytes(), oe
		}
		return stdout.Bytes(), stderr.Bytes(), ctx.Err()
	}
}
