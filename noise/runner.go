package noise

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"kbisect/internal/shell"
)

// Runner runs a shell script on the machine under test (a lab host over
// SSH, or this machine) and returns what it printed. A script that ran and
// exited non-zero is an *ExitError carrying its output; any other error
// means the runner itself failed (connection lost, cancelled).
type Runner interface {
	Run(ctx context.Context, cmd Cmd) (stdout, stderr []byte, err error)
}

// Cmd is a shell script and the environment variables it needs besides
// the machine's own (a job's ${SECRET}s): never part of the script text.
type Cmd struct {
	Script string
	Env    []string
}

// ExitError is a script that exited with a non-zero status.
type ExitError struct {
	Code   int
	Stderr string
}

func (e *ExitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
		msg = msg[i+1:] // the last line says why
	}
	if msg == "" {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return fmt.Sprintf("exit status %d: %s", e.Code, msg)
}

// LocalRunner runs scripts on this machine with sh, in their own process
// group, which is killed when the context ends.
type LocalRunner struct{}

var _ Runner = LocalRunner{}

// Run runs cmd with /bin/sh -c.
func (LocalRunner) Run(ctx context.Context, cmd Cmd) ([]byte, []byte, error) {
	shell.Trace(ctx, "", cmd.Script)
	c := exec.Command("/bin/sh", "-c", cmd.Script)
	c.Env = append(os.Environ(), cmd.Env...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A descendant that left the group holding our pipes must not keep
	// Wait from returning once the script itself has ended.
	c.WaitDelay = 2 * time.Second
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Start(); err != nil {
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return stdout.Bytes(), stderr.Bytes(), exitError(err, stderr.Bytes())
	case <-ctx.Done():
		// SIGTERM first: the osnoise script's trap puts the tracer back
		// to nop; then whatever is left is killed.
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-done
		}
		return stdout.Bytes(), stderr.Bytes(), ctx.Err()
	}
}

func exitError(err error, stderr []byte) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return &ExitError{Code: ee.ExitCode(), Stderr: string(stderr)}
	}
	return err
}

// ShellQuote quotes s for a POSIX shell: every argument that reaches a
// shell goes through it.
func ShellQuote(s string) string { return shell.Quote(s) }

// shellJoin quotes and joins an argv.
func shellJoin(argv []string) string { return shell.Join(argv...) }
