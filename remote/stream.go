package remote

import (
	"context"
	"fmt"
	"io"
	"sync"

	"kbisect/internal/shell"
)

// Stream runs a script on the host as Run does (the script and cmd.Env
// sent on standard input, never on a command line), its output written to
// stdout and stderr as it comes instead of kept: for a command that talks
// long (a build) or sends much (a tar stream). A non-zero exit is a
// *shell.ExitError whose Stderr is the end of what stderr said.
func (h *Host) Stream(ctx context.Context, cmd shell.Cmd, stdout, stderr io.Writer) error {
	shell.Trace(ctx, h.Name(), cmd.Script)
	tail := &tailWriter{w: stderr}
	return h.session(ctx, "run", h.shell(), scriptInput(cmd), stdout, tail, tail.String)
}

// Send runs a script on the host with data on its standard input (a
// file, a git pack), the script's output kept as Run keeps it. The script
// is the session's command line, so it must hold no secret.
func (h *Host) Send(ctx context.Context, script string, data io.Reader) ([]byte, []byte, error) {
	shell.Trace(ctx, h.Name(), script+" < (data)")
	stdout, stderr, err := h.sendData(ctx, "send", script, data)
	if err != nil {
		return stdout, stderr, fmt.Errorf("%s: %w", h.Name(), err)
	}
	return stdout, stderr, nil
}

// shCommand is the session's command line that runs script: sh -c, under
// sudo when the host needs it.
func (h *Host) shCommand(script string) string {
	command := "sh -c " + shell.Quote(script)
	if h.opt.Sudo {
		command = "sudo -n " + command
	}
	return command
}

// sendData runs script with data on its standard input, its output
// captured up to shell.MaxOutput a stream (more is the lab's error, op
// naming it): what Send and Copy share.
func (h *Host) sendData(ctx context.Context, op, script string, data io.Reader) ([]byte, []byte, error) {
	sendCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stdout, stderr := shell.NewCapture("stdout", shell.MaxOutput, cancel), shell.NewCapture("stderr", shell.MaxOutput, cancel)
	err := h.session(sendCtx, op, h.shCommand(script), data, stdout, stderr, stderr.String)
	if oe := shell.Overflow(stdout, stderr); oe != nil {
		err = &InfraError{Host: h.Name(), Op: op, Err: oe}
	}
	return stdout.Bytes(), stderr.Bytes(), err
}

// tailWriter passes writes on and keeps their last 8 KiB.
type tailWriter struct {
	w    io.Writer
	mu   sync.Mutex
	tail []byte
}

const tailSize = 8 << 10

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.tail = append(t.tail, p...)
	if len(t.tail) > tailSize {
		t.tail = append([]byte(nil), t.tail[len(t.tail)-tailSize:]...)
	}
	t.mu.Unlock()
	if t.w == nil {
		return len(p), nil
	}
	return t.w.Write(p)
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.tail)
}
