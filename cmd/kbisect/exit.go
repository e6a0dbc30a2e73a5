package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"kbisect/internal/shell"
	"kbisect/internal/usage"
)

// Exit codes, as in the design's CLI contract. Every command's error ends
// up in exitCode, the one place that maps errors to codes.
const (
	exitOK            = 0   // found, or the command did its job
	exitFailure       = 1   // something failed: see the message
	exitUsage         = 2   // bad flags, arguments or job file
	exitInconclusive  = 3   // skips leave several candidates
	exitNotReproduced = 4   // the endpoints did not behave as good and bad
	exitInterrupted   = 130 // Ctrl-C or SIGTERM
)

// usagef is a mistake in how kbisect was called (exit 2).
func usagef(format string, args ...any) error { return usage.Errorf(format, args...) }

// resultError carries a non-zero exit code for a command that ran to its
// end and already printed its answer (inconclusive, not reproduced).
type resultError struct{ code int }

func (e *resultError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// reportedError is an error whose JSON answer is already on stdout: it is
// still said on stderr and mapped to its exit code, but not printed again
// as JSON.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }

// exitCode prints err (unless it was already reported) and returns the
// process exit code for it.
func exitCode(ctx context.Context, err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var re *resultError
	if errors.As(err, &re) {
		return re.code
	}
	if usage.Is(err) {
		fmt.Fprintf(stderr, "kbisect: %v\n", err)
		return exitUsage
	}
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		// Also an interrupt the test command received first, on a terminal.
		fmt.Fprintf(stderr, "kbisect: interrupted: %v\n", err)
		var ri *resumableError
		if errors.As(err, &ri) {
			fmt.Fprintf(stderr, "kbisect: nothing measured is lost: the state is in %s; the same command resumes it:\n  %s\n", ri.state, ri.command)
		}
		return exitInterrupted
	}
	fmt.Fprintf(stderr, "kbisect: %v\n", err)
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		fmt.Fprintln(stderr, "kbisect: a disk is full (above, the file it could not write): free space there and run the same command again; what was recorded before is kept")
	}
	return exitFailure
}

// resumableError is a run stopped midway whose state is kept: the same
// command goes on with it.
type resumableError struct {
	err            error
	state, command string
}

func (e *resumableError) Error() string { return e.err.Error() }
func (e *resumableError) Unwrap() error { return e.err }

// resumable marks err, when ctx was interrupted, with the state directory
// and the command line that resumes it.
func resumable(ctx context.Context, err error, state, command string) error {
	if err == nil || ctx.Err() == nil || state == "" || command == "" {
		return err
	}
	return &resumableError{err: err, state: state, command: command}
}

// cliArgs is the command line kbisect was started with.
func cliArgs(c *cli.Context) []string {
	args, _ := c.App.Metadata["args"].([]string)
	return args
}

// commandLine is a command line quoted for a shell, with --state DIR added
// when it is not there (a default state directory is found again only
// from the same range and job).
func commandLine(args []string, state string) string {
	if len(args) == 0 {
		return ""
	}
	line := shell.Join(args...)
	if state != "" && !slices.ContainsFunc(args, func(a string) bool { return a == "--state" || strings.HasPrefix(a, "--state=") }) {
		line += " --state " + shell.Quote(state)
	}
	return line
}
