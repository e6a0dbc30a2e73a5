// Package shell owns what kbisect needs to run a shell script somewhere:
// quoting arguments for a POSIX shell, the small Runner interface (a
// script and its environment in, its output or an *ExitError back) that a
// lab host over SSH and this machine's LocalRunner both satisfy, and the
// tracing that lets a caller hear every command kbisect starts (kbisect
// -v), on this machine or on a lab host, through the context the command
// runs under.
//
// It is a leaf: it imports no kbisect package, so that noise, remote and
// everything that runs commands can share it without importing each other.
package shell

import (
	"context"
	"strings"
)

// Quote makes s one word for sh: as is when it holds only characters sh
// leaves alone, else in single quotes.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=/.,:+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes and joins an argv into one command line.
func Join(argv ...string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}

// A Tracer hears a command as it starts: where it runs ("" for this
// machine, else the host's name) and the command, a script of one or more
// lines. Values passed in a command's environment are not part of it.
type Tracer func(where, command string)

type tracerKey struct{}

// WithTracer returns a context whose commands are told to t.
func WithTracer(ctx context.Context, t Tracer) context.Context {
	return context.WithValue(ctx, tracerKey{}, t)
}

// Trace tells the context's tracer, if any, that command starts where.
func Trace(ctx context.Context, where, command string) {
	if t, ok := ctx.Value(tracerKey{}).(Tracer); ok && t != nil {
		t(where, command)
	}
}
