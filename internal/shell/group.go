package shell

import (
	"syscall"
	"time"
)

// StopGroup ends the process group led by pid: SIGTERM, then SIGKILL when
// done is not closed within grace; it returns once done is closed (the
// caller's Wait has returned).
func StopGroup(pid int, done <-chan struct{}, grace time.Duration) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
	}
}
