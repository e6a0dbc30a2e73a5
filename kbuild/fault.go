package kbuild

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// makeError is a make that failed, with what the machine said of it: the
// signal that ended make itself, and how many processes the kernel's OOM
// killer ended while make ran.
type makeError struct {
	targets  []string
	err      error
	signal   syscall.Signal // 0: make exited
	oomKills int64
}

func (e *makeError) Error() string {
	return fmt.Sprintf("%s: %v", strings.Join(e.targets, " "), e.err)
}

func (e *makeError) Unwrap() error { return e.err }

// oomKills is the kernel's count of OOM kills since boot (-1: unknown).
func oomKills() int64 {
	f, err := os.Open("/proc/vmstat")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "oom_kill "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// minFree is the room a build's file system must have left after a
// failed build for the failure to be the commit's: 64 MB, or a twentieth
// of a smaller file system. A build fails at the write that did not fit,
// so a failure with less than that left was the disk's.
const minFree = 64 << 20

// minInodes is the same floor for inodes.
const minInodes = 64

// room is the free space of a build's directory, measured after a
// failure.
type room struct {
	dir                string
	free, size         uint64
	freeInodes, inodes uint64
}

// buildFacts are the facts measured on the build machine after a failed
// build.
type buildFacts struct {
	rooms []room
}

// measureRooms statfs's each directory that exists (the slot's source and
// output, the cache, the temporary directory, ccache's), one per file
// system.
func measureRooms(dirs ...string) buildFacts {
	var f buildFacts
	seen := map[uint64]bool{}
	for _, d := range dirs {
		var dev syscall.Stat_t
		var st syscall.Statfs_t
		if d == "" || syscall.Stat(d, &dev) != nil || syscall.Statfs(d, &st) != nil || seen[dev.Dev] {
			continue
		}
		seen[dev.Dev] = true
		bs := uint64(st.Bsize)
		f.rooms = append(f.rooms, room{dir: d, free: st.Bavail * bs, size: st.Blocks * bs, freeInodes: st.Ffree, inodes: st.Files})
	}
	return f
}

// full says which of the measured file systems had no room left.
func (f buildFacts) full() []string {
	var out []string
	for _, r := range f.rooms {
		floor := min(uint64(minFree), r.size/20)
		switch {
		case r.free < floor:
			out = append(out, fmt.Sprintf("%s has %s free of %s", r.dir, size(r.free), size(r.size)))
		case r.inodes > 0 && r.freeInodes < minInodes:
			out = append(out, fmt.Sprintf("%s has %d inodes free of %d", r.dir, r.freeInodes, r.inodes))
		}
	}
	return out
}

func size(b uint64) string {
	switch {
	case b >= 10<<30:
		return fmt.Sprintf("%d GB", b>>30)
	case b >= 10<<20:
		return fmt.Sprintf("%d MB", b>>20)
	}
	return fmt.Sprintf("%d kB", b>>10)
}

// ccacheDir is where ccache keeps its cache, as ccache finds it.
func ccacheDir() string {
	if d := os.Getenv("CCACHE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "ccache")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".cache", "ccache")
	}
	return ""
}
