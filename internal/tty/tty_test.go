package tty

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"syscall"
	"testing"
	"unsafe"
)

func TestDevNullIsNotATerminal(t *testing.T) {
	// /dev/null is a character device, which once made kbisect draw its
	// status line into a log redirected there.
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if Interactive(f) {
		t.Error("/dev/null counts as a terminal")
	}
}

func TestFilesPipesAndBuffersAreNotTerminals(t *testing.T) {
	file, err := os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, out := range map[string]io.Writer{"a file": file, "a pipe": w, "a buffer": &bytes.Buffer{}} {
		if Interactive(out) {
			t.Errorf("%s counts as a terminal", name)
		}
	}
}

func TestATerminalIsOneUnlessTERMIsDumb(t *testing.T) {
	pty := openPTY(t)
	t.Setenv("TERM", "xterm")
	if !Interactive(pty) {
		t.Error("a pseudo-terminal does not count as a terminal")
	}
	t.Setenv("TERM", "dumb")
	if Interactive(pty) {
		t.Error("a terminal with TERM=dumb counts as one that redraws")
	}
}

// openPTY opens the terminal end of a fresh pseudo-terminal.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	var unlock, n int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Skipf("unlocking the pseudo-terminal: %v", e)
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Skipf("numbering the pseudo-terminal: %v", e)
	}
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("opening the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { pts.Close() })
	return pts
}
