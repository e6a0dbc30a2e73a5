package noise

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"kbisect/internal/shell"
)

// load is a background load running on the machine under test.
type load struct {
	r   shell.Runner
	pid int
	log string // its stderr, on the machine
	cmd string
}

// loadGrace is how long a load gets to show it started before the
// measurement begins: a command that is missing or fails at once must
// not leave every kernel looking quiet.
const loadGrace = time.Second

// startLoad starts the background load in its own session on LoadCPUs,
// its stderr kept in a file on the machine, and checks that it is still
// running a moment later.
func (w Workload) startLoad(ctx context.Context, r shell.Runner) (*load, error) {
	line := "setsid sh -c " + shell.Quote(w.Load)
	if len(w.LoadCPUs) > 0 {
		line = "taskset -c " + shell.Quote(cpuList(w.LoadCPUs)) + " " + line
	}
	script := `log=$(mktemp /tmp/kbisect-load.XXXXXX) || exit 1
` + line + ` </dev/null >/dev/null 2>"$log" &
echo "$! $log"`
	out, _, err := r.Run(ctx, shell.Cmd{Script: script, Env: w.Env})
	if err != nil {
		return nil, fmt.Errorf("starting the background load: %w", err)
	}
	f := strings.Fields(string(out))
	pid := 0
	if len(f) == 2 {
		pid, _ = strconv.Atoi(f[0])
	}
	if pid <= 1 {
		return nil, fmt.Errorf("starting the background load: no process id (%q)", out)
	}
	l := &load{r: r, pid: pid, log: f[1], cmd: w.Load}
	select {
	case <-time.After(loadGrace):
	case <-ctx.Done():
		l.stop()
		return nil, ctx.Err()
	}
	if err := l.alive(ctx); err != nil {
		l.stop()
		return nil, err
	}
	return l, nil
}

// alive fails when the load has exited, with what it said.
func (l *load) alive(ctx context.Context) error {
	// A process of the group that is not a zombie: an exited load whose
	// parent is gone can linger as one where nothing reaps orphans.
	script := fmt.Sprintf(`if cat /proc/[0-9]*/stat 2>/dev/null | awk -v g=%d '{ s = $0; sub(/.*\) /, "", s); split(s, f, " "); if (f[3] == g && f[1] != "Z") found = 1 } END { exit !found }'; then echo alive; else tail -c 2000 %s; fi`, l.pid, shell.Quote(l.log))
	out, _, err := l.r.Run(ctx, shell.Cmd{Script: script})
	if err != nil {
		return fmt.Errorf("checking the background load: %w", err)
	}
	if text := strings.TrimSpace(string(out)); text != "alive" {
		msg := "the background load is not running"
		if text != "" {
			msg += ": " + lastLine(text)
		}
		return &LoadError{Msg: msg + " (" + l.cmd + ")"}
	}
	return nil
}

// stop ends the load's whole process group and removes its log. It uses
// its own context: the load must stop even when the measurement was
// cancelled.
func (l *load) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, _ = l.r.Run(ctx, shell.Cmd{Script: fmt.Sprintf("kill -TERM -%d 2>/dev/null; sleep 1; kill -KILL -%d 2>/dev/null; rm -f %s; true", l.pid, l.pid, shell.Quote(l.log))})
}

// LoadError is a background load that did not run through the
// measurement: the sample did not measure what the job asks.
type LoadError struct{ Msg string }

func (e *LoadError) Error() string { return e.Msg }

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
