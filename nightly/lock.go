package nightly

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// lockNightly makes sure one nightly run per machine runs at a time;
// the lock file in the machine's nightly directory says who holds it.
// The function it returns lets go.
func lockNightly(dir string) (func(), error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("another kbisect nightly for this machine is running (%s): %s; let it finish", path, strings.TrimSpace(string(holder)))
	}
	host, _ := os.Hostname()
	_ = f.Truncate(0)
	fmt.Fprintf(f, "pid %d on %s since %s\n", os.Getpid(), host, time.Now().Format(time.RFC3339))
	return func() {
		_ = f.Truncate(0)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
