// Package usage marks the errors that are the caller's to fix: a flag, an
// argument, a job file or a state directory that does not fit. The CLI
// exits 2 on them; everything else is a failure of the run itself. It
// imports no kbisect package.
package usage

import (
	"errors"
	"fmt"
)

// Error is a mistake in what kbisect was given.
type Error struct{ err error }

func (e *Error) Error() string { return e.err.Error() }
func (e *Error) Unwrap() error { return e.err }

// Errorf makes a usage error, formatted as fmt.Errorf does.
func Errorf(format string, args ...any) error {
	return &Error{fmt.Errorf(format, args...)}
}

// Wrap marks err as a usage error (nil stays nil).
func Wrap(err error) error {
	if err == nil {
		return nil
	}
	return &Error{err}
}

// Is reports whether err is, or wraps, a usage error.
func Is(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
