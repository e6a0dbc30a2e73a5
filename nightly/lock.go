package nightly

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"kbisect/configs"
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
	return holding(f), nil
}

// holding writes who holds the lock f into it, and returns the function
// that lets go.
func holding(f *os.File) func() {
	host, _ := os.Hostname()
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d on %s since %s\n", os.Getpid(), host, time.Now().Format(time.RFC3339))), 0)
	return func() {
		_ = f.Truncate(0)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}

// lockFetch takes the lock of the fetches into a tree that machines
// share, waiting for another machine's fetch at most wait (and while ctx
// lasts); the lock file says who holds it. The function it returns lets
// go.
func lockFetch(ctx context.Context, path, tree string, wait time.Duration) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return holding(f), nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		select {
		case <-poll.C:
			continue
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another fetch into %s: %w", tree, ctx.Err())
		case <-deadline.C:
		}
		holder, _ := os.ReadFile(path)
		f.Close()
		who := strings.TrimSpace(string(holder))
		if who == "" {
			who = "a process that did not say who it is"
		}
		return nil, fmt.Errorf("another fetch into %s has held %s for more than %s (%s): "+
			"a fetch is bounded, so that process hangs elsewhere; end it, then run the night again", tree, path, configs.Duration(wait), who)
	}
}
