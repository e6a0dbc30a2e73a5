package kbuild

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// inUseMark, in a slot's directory, is written when a build takes the
// slot and removed when it lets the slot go with everything there
// consistent. It names the kbisect that took it and the process group of
// every make it ran. A mark found when taking the slot is a build that
// did not end well: its kbisect was killed (SIGKILL, the OOM killer, a
// stop that timed out), or make had to be killed. What that build left
// running would go on writing objects into the slot while the next build
// compiles there — an object of one commit linked into another commit's
// kernel, cached under that commit — and what it wrote may be cut short.
// So the next build first ends what is left of it (settle) and removes
// every file of the output directory written since the mark.
const inUseMark = "in-use"

// settleWait is how long the processes a killed kbisect left in a slot
// get to end on their own (make ends its recipes and deletes their
// half-written targets when it is told to stop) before they are killed;
// settleKilled how long they then get to be gone.
var (
	settleWait   = 15 * time.Second
	settleKilled = time.Minute
)

// claim takes the slot for a build: it settles what a build before left
// unfinished, then writes the mark.
func (s *slot) claim(logf func(string, ...any)) error {
	if err := s.settle(logf); err != nil {
		return err
	}
	return os.WriteFile(s.mark(), []byte(fmt.Sprintf("kbisect %d\n", os.Getpid())), 0o644)
}

func (s *slot) mark() string { return filepath.Join(filepath.Dir(s.src), inUseMark) }

// noteMake adds a make's process group to the mark before make does
// anything: a kbisect killed now leaves the group findable.
func (s *slot) noteMake(pgid int) {
	f, err := os.OpenFile(s.mark(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = fmt.Fprintf(f, "make %d\n", pgid)
}

// release lets the slot go: the mark is removed unless a make there was
// cut short without ending cleanly (then the next build settles it).
func (s *slot) release() {
	if !s.suspect {
		_ = os.Remove(s.mark())
	}
}

// settle ends what a build that did not end well left in the slot and
// removes what it wrote. Its processes are found by their process group
// (a make's, as the mark names it) or as git, working in the slot, and
// started since the mark: another process that happens to be in the slot,
// or a process id used again, is left alone.
func (s *slot) settle(logf func(string, ...any)) error {
	mark := s.mark()
	st, err := os.Stat(mark)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("build slot %s: %v", filepath.Dir(mark), err)
	}
	b, err := os.ReadFile(mark)
	if err != nil {
		return fmt.Errorf("build slot %s: %v", filepath.Dir(mark), err)
	}
	var groups []int
	for _, line := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(line, "make "); ok {
			if pgid, err := strconv.Atoi(n); err == nil && pgid > 1 {
				groups = append(groups, pgid)
			}
		}
	}
	since := st.ModTime()
	ended, err := endLeftovers(filepath.Dir(s.src), since, groups)
	if err != nil {
		return err
	}
	removed, err := removeWrittenSince(s.out, since)
	if err != nil {
		return fmt.Errorf("build slot %s: removing what a build cut short wrote: %v", s.out, err)
	}
	if err := removeStaleIndexLock(s.src); err != nil {
		return err
	}
	if err := os.Remove(mark); err != nil {
		return fmt.Errorf("build slot %s: %v", filepath.Dir(mark), err)
	}
	logf("build slot %s: a build there did not end (its kbisect killed, or make killed): %s, %d files it wrote removed; the next build compiles them again",
		filepath.Dir(mark), processesText(ended), removed)
	return nil
}

func processesText(n int) string {
	switch n {
	case 0:
		return "nothing of it still ran"
	case 1:
		return "1 process of it still ran and was ended"
	}
	return fmt.Sprintf("%d processes of it still ran and were ended", n)
}

// endLeftovers waits for the processes a build left in the slot dir to
// end, then kills them; it returns how many there were. The processes
// are told apart from others by proc (see leftovers).
func endLeftovers(dir string, since time.Time, groups []int) (int, error) {
	seen := map[int]bool{}
	start := time.Now()
	killed := false
	for {
		left := leftovers(dir, since, groups)
		for _, p := range left {
			seen[p] = true
		}
		if len(left) == 0 {
			return len(seen), nil
		}
		switch waited := time.Since(start); {
		case waited > settleWait+settleKilled:
			return len(seen), fmt.Errorf("build slot %s: processes %v, left by a kbisect that was killed, do not end even when killed: end them (or reboot), then run kbisect again", dir, left)
		case waited > settleWait || killed:
			for _, p := range left {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			killed = true
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leftovers lists the live processes working in dir (within) and
// started since the build's mark (a process id used again by a newer
// process started before it is not one), other than this one, that are
// in one of the build's make process groups, or git.
func leftovers(dir string, since time.Time, groups []int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	boot := bootTime()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		p, ok := readProc(pid)
		if !ok || p.state == 'Z' || boot.IsZero() {
			continue
		}
		// Start times are in clock ticks (100 a second), the boot time
		// in whole seconds: a process started in the second before the
		// mark may be the build's.
		if started := boot.Add(time.Duration(p.startTicks) * 10 * time.Millisecond); started.Before(since.Add(-2 * time.Second)) {
			continue
		}
		if !slices.Contains(groups, p.pgrp) && p.comm != "git" {
			continue
		}
		if within(dir, pid) {
			out = append(out, pid)
		}
	}
	return out
}

// within says whether process pid works in dir: its current directory is
// in it, or (git worktree add, run from the user's tree) its command line
// names it.
func within(dir string, pid int) bool {
	in := func(path string) bool { return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator)) }
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil && in(cwd) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return slices.ContainsFunc(strings.Split(string(b), "\x00"), in)
}

// groupLive says whether process group pgid has a process that is not a
// zombie.
func groupLive(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if p, ok := readProc(pid); ok && p.pgrp == pgid && p.state != 'Z' {
				return true
			}
		}
	}
	return false
}

// proc is what /proc/PID/stat says of a process.
type proc struct {
	comm       string
	state      byte
	pgrp       int
	startTicks int64
}

func readProc(pid int) (proc, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return proc{}, false
	}
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice threads
	// itrealvalue starttime …: comm may hold spaces and parentheses.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return proc{}, false
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return proc{}, false
	}
	pgrp, err1 := strconv.Atoi(f[2])
	start, err2 := strconv.ParseInt(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return proc{}, false
	}
	return proc{comm: string(b[open+1 : end]), state: f[0][0], pgrp: pgrp, startTicks: start}, true
}

// bootTime is when the machine booted (/proc/stat's btime), zero when
// unknown.
func bootTime() time.Time {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Unix(n, 0)
			}
		}
	}
	return time.Time{}
}

// removeWrittenSince removes the files under dir modified at or after t
// and returns how many: make rebuilds what is missing.
func removeWrittenSince(dir string, t time.Time) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if info.ModTime().Before(t) {
			return nil
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		n++
		return nil
	})
	return n, err
}

// removeStaleIndexLock removes the index.lock a git killed in the slot's
// worktree left (no git runs there any more: settle ended them), which
// would fail every git command there.
func removeStaleIndexLock(src string) error {
	b, err := os.ReadFile(filepath.Join(src, ".git"))
	if err != nil {
		return nil // no worktree yet, or not one kbisect made
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return nil
	}
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(src, gitdir)
	}
	if err := os.Remove(filepath.Join(gitdir, "index.lock")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("build slot %s: a stale index.lock: %v", src, err)
	}
	return nil
}
