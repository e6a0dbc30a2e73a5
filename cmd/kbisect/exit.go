package main

import (
	"context"
	"errors"
	"fmt"
	"io"

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
		return exitInterrupted
	}
	fmt.Fprintf(stderr, "kbisect: %v\n", err)
	return exitFailure
}
