package remote

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"kbisect/internal/shell"
)

// console captures the host's console (serial-over-LAN, conserver) while
// a kernel boots: what a hung kernel said last is the only evidence.
type console struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	tail []byte // the last consoleTail bytes
	log  io.Writer
	done chan struct{}
}

const consoleTail = 64 << 10

// startConsole runs the console command here; its output goes to log (when
// not nil) and is kept for scanning.
func startConsole(command string, env []string, log io.Writer) (*console, error) {
	c := &console{log: log, done: make(chan struct{})}
	c.cmd = exec.Command("/bin/sh", "-c", command)
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.cmd.Stdout, c.cmd.Stderr = c, c
	c.cmd.WaitDelay = 2 * time.Second
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	return c, nil
}

// Write keeps the tail and passes everything on to the log.
func (c *console) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.tail = append(c.tail, p...)
	if len(c.tail) > consoleTail {
		c.tail = append([]byte(nil), c.tail[len(c.tail)-consoleTail:]...)
	}
	log := c.log
	c.mu.Unlock()
	if log != nil {
		_, _ = log.Write(p)
	}
	return len(p), nil
}

// stop ends the console command and returns the tail of what it printed.
func (c *console) stop() string {
	shell.StopGroup(c.cmd.Process.Pid, c.done, 3*time.Second)
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.ReplaceAll(string(c.tail), "\r", "")
}

// panicLine matches what a kernel says when it dies or is about to.
var panicLine = regexp.MustCompile(`(?m)^.*(Kernel panic - not syncing|Oops:|BUG:|general protection fault|Unable to handle kernel|watchdog: BUG: soft lockup|rcu_sched detected stalls|RCU: .*stall).*$`)

// consoleEvidence returns the first panic line of the console, and its
// last lines, for a boot failure.
func consoleEvidence(text string) (panicked string, last string) {
	if m := panicLine.FindString(text); m != "" {
		panicked = strings.TrimSpace(m)
	}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return panicked, strings.Join(lines, "\n")
}

// withConsole runs boot with the console captured when there is one, and
// adds what it shows to a kernel failure.
func withConsole(ctx context.Context, opt BootOptions, boot func() error) error {
	if opt.Console == "" {
		return boot()
	}
	shell.Trace(ctx, "", opt.Console)
	c, err := startConsole(opt.Console, opt.LocalEnv, opt.ConsoleLog)
	if err != nil {
		return &InfraError{Host: "console", Op: "start", Err: err}
	}
	err = boot()
	text := c.stop()
	var ke *KernelError
	if errors.As(err, &ke) {
		ke.Panic, ke.Console = consoleEvidence(text)
		if ke.Panic != "" {
			ke.Reason += "; the console says: " + ke.Panic
		}
	}
	return err
}

// ConsoleEvidence is, for a console captured elsewhere (a QEMU guest's
// serial port), its first panic line and its last lines.
func ConsoleEvidence(text string) (panicked, last string) { return consoleEvidence(text) }
