package lab

import (
	"os/signal"
	"syscall"
	"unsafe"
)

// foregroundTerminal returns the terminal on standard input when kbisect
// is the foreground job of it, or -1. The test command then gets the
// terminal while it runs — as it would under git bisect run — so a sudo
// password prompt or an ssh host-key question works instead of stopping the
// command for reading from a background process group.
func foregroundTerminal() int {
	const fd = 0
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return -1 // not a terminal
	}
	if int(pgrp) != syscall.Getpgrp() {
		return -1 // kbisect runs in the background: leave the terminal alone
	}
	return fd
}

// reclaimTerminal makes kbisect's process group the terminal's foreground
// again once the test command is done. A background process that changes
// the foreground group is sent SIGTTOU, so it is ignored meanwhile.
func reclaimTerminal(fd int) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	pgrp := int32(syscall.Getpgrp())
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&pgrp)))
}
