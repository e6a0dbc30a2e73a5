package kbuild

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// builtStamp, in a slot's output directory, is written when a build there
// ends: its mtime is at or after every file the build wrote.
const builtStamp = ".kbisect-built"

// stampBuilt marks the end of a build in the slot.
func (s *slot) stampBuilt() {
	_ = os.WriteFile(filepath.Join(s.out, builtStamp), []byte("built\n"), 0o644)
}

// waitPastBuild returns once a file written in the source tree gets an
// mtime after the slot's last build ended. make rebuilds an object only
// when a source is newer, and a filesystem stamps times by a coarse clock
// (a kernel tick; a whole second on some): a source that git rewrites in
// the same tick as the last build wrote its object would look no newer,
// the old object would be linked, and another commit's kernel would be
// cached under this one's key. On a fine clock, or with a build long
// past, it returns at once.
func (s *slot) waitPastBuild(ctx context.Context) error {
	st, err := os.Stat(filepath.Join(s.out, builtStamp))
	if err != nil {
		return nil // no build yet
	}
	probe := filepath.Join(s.src, ".kbisect-clock")
	defer os.Remove(probe)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := os.WriteFile(probe, nil, 0o644); err != nil {
			return fmt.Errorf("build slot %s: %v", s.src, err)
		}
		p, err := os.Stat(probe)
		if err != nil {
			return fmt.Errorf("build slot %s: %v", s.src, err)
		}
		if p.ModTime().After(st.ModTime()) {
			return nil
		}
		if time.Now().After(deadline) {
			// A stamp far in the future (a clock set back) is not
			// waited out: its build's objects are not trusted either,
			// and the slot builds afresh.
			return s.forgetBuild()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// forgetBuild empties the slot's output directory: the next build there
// configures and compiles everything.
func (s *slot) forgetBuild() error {
	if err := os.RemoveAll(s.out); err != nil {
		return fmt.Errorf("build slot %s: %v", s.out, err)
	}
	return os.MkdirAll(s.out, 0o755)
}
