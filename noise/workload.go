package noise

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"kbisect/internal/cpulist"
	"kbisect/internal/shell"
)

// Workload is one measurement to run on the machine under test: which
// tool, on which CPUs, for how long, with which options, and an optional
// background load. It is the job file's workload section, resolved.
type Workload struct {
	Tool     string
	CPUs     []int // measured: the isolated CPUs
	Duration time.Duration
	// Housekeeping are CPUs for the tools' own threads (rtla, the main
	// threads of oslat and cyclictest); none when empty.
	Housekeeping []int
	// osnoise and rtla osnoise: period, runtime per period, and the
	// smallest interference counted (tracing_thresh, always written:
	// its default changed from 5 us to 1 us in 6.11).
	Period, Runtime, NoiseThreshold time.Duration
	// Priority is the SCHED_FIFO priority of the measuring threads (0:
	// the tool's default); Args are extra arguments for the tool.
	Priority int
	Args     []string
	// Command is the custom workload (tool command), its metric and env.
	Command       string
	CommandMetric CommandMetric
	Env           []string
	// Load runs in the background on LoadCPUs while measuring.
	Load     string
	LoadCPUs []int
}

// Raw is what a measurement printed, kept for the state directory.
type Raw struct {
	Script string `json:"script"`
	Stdout []byte `json:"-"`
	Stderr []byte `json:"-"`
}

// SetupError says the machine cannot run the workload: a tool is not
// installed, or the kernel lacks what the tool needs. Kernel tells which:
// a kernel without the osnoise tracer is that commit's problem (skip it),
// a missing rtla is the lab's (fix it, the run stops).
type SetupError struct {
	Msg    string
	Kernel bool
}

func (e *SetupError) Error() string { return e.Msg }

// Exit codes the scripts use to say why they stopped.
const (
	exitNoTracefs  = 90
	exitNoTracer   = 91
	exitTracerBusy = 92
	exitNotFound   = 127
)

// Measure runs the workload once through r and parses what it printed.
// The background load, if any, is started first and always stopped.
func (w Workload) Measure(ctx context.Context, r shell.Runner) (*Measurement, Raw, error) {
	if err := w.check(); err != nil {
		return nil, Raw{}, err
	}
	var bg *load
	if w.Load != "" {
		var err error
		if bg, err = w.startLoad(ctx, r); err != nil {
			return nil, Raw{}, err
		}
		defer bg.stop()
	}
	script := w.Script()
	raw := Raw{Script: script}
	// A hung tool must not hang the run: the measurement gets its
	// duration and a margin (a command, its duration exactly).
	limit := w.Duration + max(30*time.Second, w.Duration/2)
	if w.Tool == ToolCommand {
		limit = w.Duration
	}
	runCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var err error
	raw.Stdout, raw.Stderr, err = r.Run(runCtx, shell.Cmd{Script: script, Env: w.Env})
	var oe *shell.OutputError
	if errors.As(err, &oe) {
		return nil, raw, w.outputError(oe)
	}
	if err != nil && ctx.Err() == nil && runCtx.Err() != nil {
		return nil, raw, fmt.Errorf("%s did not finish within %s", w.Tool, limit)
	}
	if err != nil {
		return nil, raw, w.runError(err, raw.Stderr)
	}
	if bg != nil {
		if err := bg.alive(ctx); err != nil {
			return nil, raw, err
		}
	}
	m, err := w.parse(raw.Stdout)
	if err != nil {
		return nil, raw, err
	}
	for _, line := range strings.Split(string(raw.Stderr), "\n") {
		if msg, ok := strings.CutPrefix(line, "kbisect-warning: "); ok {
			m.Warnings = append(m.Warnings, msg)
		}
	}
	return m, raw, w.checkCPUs(m)
}

func (w Workload) check() error {
	switch w.Tool {
	case ToolOsnoise, ToolRtlaOsnoise, ToolRtlaTimerlat, ToolOslat, ToolCyclictest, ToolCommand:
	default:
		return fmt.Errorf("workload: unknown tool %q", w.Tool)
	}
	switch {
	case w.Duration <= 0 || w.Period < 0 || w.Runtime < 0 || w.NoiseThreshold < 0:
		return fmt.Errorf("workload: durations must be positive")
	case (w.Tool == ToolOsnoise || w.Tool == ToolCommand) && (w.Priority != 0 || len(w.Args) > 0):
		return fmt.Errorf("workload: %s takes no priority and no arguments", w.Tool)
	case w.Runtime > time.Second && w.Period == 0:
		return fmt.Errorf("workload: runtime %s is longer than the tracer's 1s period: give the period too", w.Runtime)
	case w.Duration < time.Second && w.Tool != ToolCommand:
		return fmt.Errorf("workload: duration %s is less than a second", w.Duration)
	case len(w.CPUs) == 0 && w.Tool != ToolCommand:
		return fmt.Errorf("workload: no CPUs to measure")
	case w.Tool == ToolCommand && w.Command == "":
		return fmt.Errorf("workload: tool command without a command")
	case w.Runtime > w.Period && w.Period > 0:
		return fmt.Errorf("workload: runtime %s is longer than the period %s", w.Runtime, w.Period)
	}
	for _, d := range []time.Duration{w.Period, w.Runtime, w.NoiseThreshold} {
		if d%time.Microsecond != 0 {
			return fmt.Errorf("workload: %s is not a whole number of microseconds, which the tracer takes", d)
		}
	}
	return nil
}

// Script returns the shell script that runs the workload.
func (w Workload) Script() string {
	switch w.Tool {
	case ToolOsnoise:
		return w.osnoiseScript()
	case ToolCommand:
		return w.pinned(w.CPUs, "sh -c "+shell.Quote(w.Command))
	}
	return w.pinned(w.Housekeeping, shell.Join(w.argv()...))
}

// pinned runs a command line with taskset on cpus, when there are any.
func (w Workload) pinned(cpus []int, line string) string {
	if len(cpus) == 0 {
		return "exec " + line
	}
	return "exec taskset -c " + shell.Quote(cpuList(cpus)) + " " + line
}

// wholeSeconds rounds a duration up to whole seconds, as the tools (and
// busybox's sleep) take them.
func wholeSeconds(d time.Duration) string {
	return strconv.Itoa(int((d + time.Second - 1) / time.Second))
}

// argv is the command line of rtla, oslat or cyclictest.
func (w Workload) argv() []string {
	secs := wholeSeconds(w.Duration)
	cpus := cpuList(w.CPUs)
	var a []string
	switch w.Tool {
	case ToolRtlaOsnoise:
		a = []string{"rtla", "osnoise", "top", "-q", "-c", cpus, "-d", secs + "s"}
		if w.NoiseThreshold > 0 {
			a = append(a, "-T", usArg(w.NoiseThreshold))
		}
		if w.Period > 0 {
			a = append(a, "-p", usArg(w.Period))
		}
		if w.Runtime > 0 {
			a = append(a, "-r", usArg(w.Runtime))
		}
		if w.Priority > 0 {
			a = append(a, "-P", "f:"+strconv.Itoa(w.Priority))
		}
	case ToolRtlaTimerlat:
		a = []string{"rtla", "timerlat", "top", "-q", "-c", cpus, "-d", secs + "s"}
		if w.Priority > 0 {
			a = append(a, "-P", "f:"+strconv.Itoa(w.Priority))
		}
	case ToolOslat:
		a = []string{"oslat", "-q", "-c", cpus, "-D", secs} // seconds; rt-tests 2.4 takes no "s"
		if len(w.Housekeeping) > 0 {
			a = append(a, "-C", strconv.Itoa(w.Housekeeping[0]))
		}
		if w.Priority > 0 {
			a = append(a, "-f", strconv.Itoa(w.Priority))
		}
	case ToolCyclictest:
		// One thread per measured CPU, in order (-a with -t), every
		// thread at the same interval (-d 0); -q prints the T: lines once.
		prio := w.Priority
		if prio == 0 {
			prio = 95
		}
		a = []string{"cyclictest", "-q", "-m", "-a", cpus, "-t", strconv.Itoa(len(w.CPUs)), "-p", strconv.Itoa(prio), "-i", "1000", "-d", "0", "-D", secs}
		if len(w.Housekeeping) > 0 {
			a = append(a, "--mainaffinity="+cpuList(w.Housekeeping))
		}
	}
	return append(a, w.Args...)
}

func usArg(d time.Duration) string { return strconv.FormatInt(int64(d/time.Microsecond), 10) }

func (w Workload) parse(out []byte) (*Measurement, error) {
	if w.Tool == ToolCommand {
		return ParseCommand(out, w.CommandMetric)
	}
	m, err := Parse(w.Tool, out)
	if err != nil {
		return nil, err
	}
	if w.Tool == ToolCyclictest {
		w.cyclictestCPUs(m)
	}
	return m, nil
}

// cyclictestCPUs names cyclictest's threads by CPU when its text output
// numbered them by thread: -a with -t puts thread i on the i-th CPU of
// the list.
func (w Workload) cyclictestCPUs(m *Measurement) {
	byThread := false
	var kept []string
	for _, msg := range m.Warnings {
		if msg == threadIndexWarning {
			byThread = true
			continue
		}
		kept = append(kept, msg)
	}
	if !byThread || len(m.CPUs) != len(w.CPUs) {
		return
	}
	cpus := append([]int(nil), w.CPUs...)
	sort.Ints(cpus)
	for i := range m.CPUs {
		if m.CPUs[i].CPU < 0 || m.CPUs[i].CPU >= len(cpus) {
			return
		}
	}
	for i := range m.CPUs {
		m.CPUs[i].CPU = cpus[m.CPUs[i].CPU]
	}
	m.sortCPUs()
	m.Warnings = kept
}

// checkCPUs makes sure every CPU asked for reported: a CPU that is offline
// or outside the tool's mask must not silently drop out of the verdict.
func (w Workload) checkCPUs(m *Measurement) error {
	if w.Tool == ToolCommand {
		return nil
	}
	got := map[int]bool{}
	for _, c := range m.CPUs {
		got[c.CPU] = true
	}
	var missing []int
	for _, c := range w.CPUs {
		if !got[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s reported nothing for CPU %s (offline, or not in the tool's CPU mask?)", w.Tool, cpuList(missing))
	}
	return nil
}

// outputError says what to do about a workload that printed more than a
// runner keeps: the lab's setup (the job's command, or a tool asked for
// more output than a measurement needs), never a verdict.
func (w Workload) outputError(oe *shell.OutputError) error {
	what, fix := w.Tool, "lower workload.duration, or drop the workload.args that make it print every event"
	if w.Tool == ToolCommand {
		what, fix = "workload.command", "make it print only its results (send its log to a file on the host), or print less often"
	}
	return &SetupError{Msg: fmt.Sprintf("%s printed more than %s on its %s, the most kept of a measurement, and was stopped: %s",
		what, sizeOf(oe.Limit), oe.Stream, fix)}
}

// sizeOf says a byte count in MiB.
func sizeOf(n int) string { return fmt.Sprintf("%d MiB", n>>20) }

// runError turns a failed run into what it means: a missing tool or
// tracer, or the tool's own failure with its last words.
func (w Workload) runError(err error, stderr []byte) error {
	var ee *shell.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	text := string(stderr)
	if w.Tool == ToolOsnoise {
		switch ee.Code {
		case exitNoTracefs:
			return &SetupError{Msg: "tracefs is not mounted and cannot be (needs root and CONFIG_TRACING)"}
		case exitNoTracer:
			return &SetupError{Kernel: true, Msg: "the running kernel has no osnoise tracer: build it with CONFIG_OSNOISE_TRACER=y"}
		case exitTracerBusy:
			return &SetupError{Msg: strings.TrimSpace(strings.TrimPrefix(lastLine(text), "kbisect: "))}
		}
	}
	switch {
	case strings.Contains(text, "Tracer osnoise not found") || strings.Contains(text, "Tracer timerlat not found"):
		opt := "CONFIG_OSNOISE_TRACER"
		if w.Tool == ToolRtlaTimerlat {
			opt = "CONFIG_TIMERLAT_TRACER"
		}
		return &SetupError{Kernel: true, Msg: fmt.Sprintf("the running kernel lacks the tracer %s needs: build it with %s=y", w.Tool, opt)}
	case strings.Contains(text, "needs root permission"):
		return &SetupError{Msg: w.Tool + " needs root: run as root or set host.sudo"}
	case strings.Contains(text, "Could not initialize libnuma"):
		return &SetupError{Kernel: true, Msg: "oslat needs a kernel with NUMA support (CONFIG_NUMA=y)"}
	case ee.Code == exitNotFound:
		if bin := missingBinary(text); bin != "" {
			return &SetupError{Msg: fmt.Sprintf("%s is not installed on the machine (%s)", bin, installHint(bin))}
		}
	}
	return fmt.Errorf("%s: %w", w.Tool, err)
}

// notFound matches how sh, bash and taskset say a program is missing.
var notFound = regexp.MustCompile(`(?:^|\s|: )([^\s:]+): (?:command )?not found|failed to execute ([^\s:]+): No such file`)

// missingBinary names the program the shell could not find, or "".
func missingBinary(stderr string) string {
	m := notFound.FindStringSubmatch(stderr)
	if m == nil {
		return ""
	}
	if m[1] != "" {
		return m[1]
	}
	return m[2]
}

func installHint(bin string) string {
	switch bin {
	case "rtla":
		return "Debian: apt-get install rtla; or build tools/tracing/rtla"
	case "oslat", "cyclictest":
		return "Debian: apt-get install rt-tests"
	case "taskset", "setsid":
		return "Debian: apt-get install util-linux"
	}
	return "install it, or give its full path"
}

// cpuList writes CPUs as a compact kernel cpulist ("1-16,33-48"), which
// osnoise/cpus needs under 256 bytes.
func cpuList(cpus []int) string {
	s := append([]int(nil), cpus...)
	sort.Ints(s)
	return cpulist.Format(s)
}
