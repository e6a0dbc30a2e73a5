// Package tty says whether kbisect's output reaches a person at a
// terminal, who gets a status line redrawn in place, rather than a file,
// pipe or log, which get one time-stamped line per event.
//
// It is a leaf: it imports no kbisect package.
package tty

import (
	"io"
	"os"

	"golang.org/x/term"
)

// Interactive reports whether w is a terminal that can redraw a line:
// a terminal device (asked of the terminal driver, since /dev/null is a
// character device too) whose TERM is not "dumb" (Emacs shell buffers and
// the like, which print control sequences as text).
func Interactive(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb"
}
