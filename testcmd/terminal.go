package testcmd

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// hasTerminal reports whether kbisect has a controlling terminal.
func hasTerminal() bool {
	f, err := os.OpenFile("/dev/tty", os.O_RDONLY|syscall.O_NOCTTY, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// writeLeftover records a running test command: its pid, whether it leads
// its own process group, and its start time (so a recycled pid after a
// reboot is never mistaken for it).
func writeLeftover(path string, pid int, group bool) error {
	start, err := processStart(pid)
	if err != nil {
		return fmt.Errorf("read the test command's start time: %w", err)
	}
	line := fmt.Sprintf("%d %v %d\n", pid, group, start)
	return os.WriteFile(path, []byte(line), 0o644)
}

// StopLeftover stops the test command a killed kbisect left running, as
// recorded in path, so that it does not run on in the tree while the
// resumed bisection checks out other commits. It says whether one was
// found.
func StopLeftover(path string, grace time.Duration) (bool, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer os.Remove(path)
	var pid int
	var group bool
	var start uint64
	if _, err := fmt.Sscanf(string(data), "%d %t %d", &pid, &group, &start); err != nil {
		return false, nil // unreadable: nothing we can trust to kill
	}
	if now, err := processStart(pid); err != nil || now != start {
		return false, nil // gone, or the pid belongs to another process now
	}
	if group {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for time.Now().Before(deadline) && syscall.Kill(-pid, 0) == nil {
			time.Sleep(20 * time.Millisecond)
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return true, nil
	}
	tree := processTree(pid)
	signalAll(tree, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) && alive(tree) {
		time.Sleep(20 * time.Millisecond)
	}
	signalAll(tree, syscall.SIGKILL)
	return true, nil
}

// processTree lists pid and its descendants, read from /proc.
func processTree(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	tree := []int{pid}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, children[tree[i]]...)
	}
	return tree
}

func signalAll(pids []int, sig syscall.Signal) {
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
}

// alive reports whether any of pids still runs (zombies do not count).
func alive(pids []int) bool {
	for _, p := range pids {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(data, ')'); i >= 0 && !strings.HasPrefix(string(data[i+1:]), " Z") {
			return true
		}
	}
	return false
}

// processStart reads a process's start time (field 22 of /proc/PID/stat).
func processStart(pid int) (uint64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, field 2, may hold spaces: count after its ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 20 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}
