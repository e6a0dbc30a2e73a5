package noise

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"kbisect/internal/shell"
)

// fakeTracefs is a directory laid out like tracefs, and a "kernel" that
// fills the trace buffer once the osnoise tracer is switched on, as the
// real one does.
type fakeTracefs struct {
	dir   string
	trace []byte
}

func newFakeTracefs(t *testing.T, trace []byte, tracers string) *fakeTracefs {
	t.Helper()
	f := &fakeTracefs{dir: t.TempDir(), trace: trace}
	files := map[string]string{
		"available_tracers":             tracers + "\n",
		"current_tracer":                "nop\n",
		"tracing_on":                    "1\n",
		"tracing_thresh":                "0\n",
		"trace":                         "stale\n",
		"osnoise/cpus":                  "0-7\n",
		"osnoise/period_us":             "100000\n",
		"osnoise/runtime_us":            "100000\n",
		"osnoise/stop_tracing_us":       "17\n", // left over by an earlier run
		"osnoise/stop_tracing_total_us": "0\n",
		"osnoise/options":               "NO_DEFAULTS OSNOISE_WORKLOAD\n",
		"per_cpu/cpu1/stats":            "entries: 4\noverrun: 0\n",
		"per_cpu/cpu2/stats":            "entries: 4\noverrun: 12\n",
	}
	for name, content := range files {
		p := filepath.Join(f.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// kernel plays the tracer: when current_tracer says osnoise, the trace
// buffer gets the periods.
func (f *fakeTracefs) kernel(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
		if cur, _ := os.ReadFile(filepath.Join(f.dir, "current_tracer")); strings.TrimSpace(string(cur)) == "osnoise" {
			_ = os.WriteFile(filepath.Join(f.dir, "trace"), f.trace, 0o644)
			return
		}
	}
}

func (f *fakeTracefs) read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestOsnoiseWorkloadDrivesTracefsAndPutsItBack(t *testing.T) {
	fs := newFakeTracefs(t, fixture(t, "lkml-2021-07-18_bristot_osnoise_trace_PREEMPT_RT_7flags.txt"), "osnoise timerlat function nop")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go fs.kernel(ctx)
	t.Setenv("KBISECT_TRACEFS", fs.dir)
	w := Workload{Tool: ToolOsnoise, CPUs: []int{0, 1, 2, 3, 4}, Duration: time.Second, Period: time.Second, Runtime: 950 * time.Millisecond, NoiseThreshold: time.Microsecond}
	m, raw, err := w.Measure(ctx, shell.LocalRunner{})
	if err != nil {
		t.Fatalf("%v\n%s", err, raw.Stderr)
	}
	if len(m.CPUs) != 5 || m.CPUs[2].Osnoise.MaxSingle != 118*time.Microsecond {
		t.Errorf("measured %+v", m.CPUs)
	}
	for name, want := range map[string]string{
		"current_tracer": "nop", "tracing_on": "0", "tracing_thresh": "1", "osnoise/cpus": "0-4",
		"osnoise/period_us": "1000000", "osnoise/runtime_us": "950000", "osnoise/stop_tracing_us": "0",
		"osnoise/stop_tracing_total_us": "0", "osnoise/options": "DEFAULTS",
	} {
		if got := fs.read(t, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if len(m.Warnings) != 1 || m.Warnings[0] != "cpu2 lost 12 events: the trace buffer overflowed" {
		t.Errorf("warnings %q", m.Warnings)
	}
}

func TestOsnoiseWorkloadSaysWhatTheKernelLacks(t *testing.T) {
	fs := newFakeTracefs(t, nil, "function nop")
	t.Setenv("KBISECT_TRACEFS", fs.dir)
	w := Workload{Tool: ToolOsnoise, CPUs: []int{1}, Duration: time.Second}
	_, _, err := w.Measure(context.Background(), shell.LocalRunner{})
	var se *SetupError
	if !errors.As(err, &se) || !se.Kernel || !strings.Contains(se.Msg, "CONFIG_OSNOISE_TRACER=y") {
		t.Errorf("got %v", err)
	}
	if err := os.WriteFile(filepath.Join(fs.dir, "available_tracers"), []byte("osnoise timerlat nop\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fs.dir, "current_tracer"), []byte("timerlat\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = w.Measure(context.Background(), shell.LocalRunner{})
	if !errors.As(err, &se) || se.Kernel || se.Msg != "the timerlat tracer is in use on this machine: stop it first" {
		t.Errorf("got %v", err)
	}
}

func TestOsnoiseWorkloadIsPutBackWhenCancelled(t *testing.T) {
	fs := newFakeTracefs(t, nil, "osnoise nop") // the kernel never fills the buffer
	t.Setenv("KBISECT_TRACEFS", fs.dir)
	w := Workload{Tool: ToolOsnoise, CPUs: []int{1}, Duration: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for fs.read(t, "current_tracer") != "osnoise" {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	_, _, err := w.Measure(ctx, shell.LocalRunner{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v", err)
	}
	if got := fs.read(t, "current_tracer"); got != "nop" {
		t.Errorf("current_tracer left at %q", got)
	}
}

// fakeTool puts an executable named name on PATH that prints the fixture
// file and records its arguments.
func fakeTool(t *testing.T, name, file string) (argsFile string) {
	t.Helper()
	bin := t.TempDir()
	argsFile = filepath.Join(bin, "args")
	out := filepath.Join(bin, "out")
	if err := os.WriteFile(out, fixture(t, file), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho \"$@\" > " + shell.Quote(argsFile) + "\ncat " + shell.Quote(out) + "\n"
	if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	return argsFile
}

func TestToolWorkloadsRunWithTheirCPUsPinned(t *testing.T) {
	for _, c := range []struct {
		tool, bin, fixture, args string
		cpus                     []int
		check                    func(*Measurement) bool
	}{
		{ToolOslat, "oslat", "lab612rt-smp2-inject-oslat.txt", "-q -c 1 -D 5 -C 0 -f 95", []int{1},
			func(m *Measurement) bool { return m.CPUs[0].Latency.Max == 6178*time.Microsecond }},
		{ToolRtlaOsnoise, "rtla", "lab612rt-smp2-rtla-osnoise-top.txt", "osnoise top -q -c 1 -d 5s -T 1 -P f:95", []int{1},
			func(m *Measurement) bool { return m.CPUs[0].Osnoise.MaxSingle == 400*time.Microsecond }},
		{ToolCyclictest, "cyclictest", "cyclictest24_q.txt", "", nil, nil},
	} {
		if c.cpus == nil {
			continue // cyclictest is checked below with its thread mapping
		}
		args := fakeTool(t, c.bin, c.fixture)
		w := Workload{Tool: c.tool, CPUs: c.cpus, Duration: 5 * time.Second, Housekeeping: []int{0}, Priority: 95, NoiseThreshold: time.Microsecond}
		m, _, err := w.Measure(context.Background(), shell.LocalRunner{})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if got, _ := os.ReadFile(args); strings.TrimSpace(string(got)) != c.args {
			t.Errorf("%s ran with %q, want %q", c.tool, got, c.args)
		}
		if !c.check(m) {
			t.Errorf("%s: %+v", c.tool, m.CPUs)
		}
	}
}

func TestCyclictestThreadsAreNamedByTheirCPUs(t *testing.T) {
	fakeTool(t, "cyclictest", "cyclictest24_H30_t2.txt")
	w := Workload{Tool: ToolCyclictest, CPUs: []int{5, 3}, Duration: 2 * time.Second}
	m, _, err := w.Measure(context.Background(), shell.LocalRunner{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.CPUs) != 2 || m.CPUs[0].CPU != 3 || m.CPUs[1].CPU != 5 || m.CPUs[1].Latency.Max != 1588*time.Microsecond {
		t.Errorf("%+v", m.CPUs)
	}
	for _, w := range m.Warnings {
		if strings.Contains(w, "thread indices") {
			t.Errorf("warning kept: %s", w)
		}
	}
}

func TestAMissingToolOrCPUIsAClearError(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	w := Workload{Tool: ToolOslat, CPUs: []int{1}, Duration: time.Second}
	_, _, err := w.Measure(context.Background(), shell.LocalRunner{})
	var se *SetupError
	if !errors.As(err, &se) || se.Kernel || se.Msg != "oslat is not installed on the machine (Debian: apt-get install rt-tests)" {
		t.Errorf("got %v", err)
	}
	t.Setenv("PATH", "/usr/bin:/bin")
	fakeTool(t, "oslat", "lab612rt-smp2-oslat.txt")
	w.CPUs = []int{1, 2}
	if _, _, err := w.Measure(context.Background(), shell.LocalRunner{}); err == nil || err.Error() != "oslat reported nothing for CPU 2 (offline, or not in the tool's CPU mask?)" {
		t.Errorf("got %v", err)
	}
}

func TestCommandWorkloadWithLoadAndSecrets(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "load-ran")
	w := Workload{
		Tool:     ToolCommand,
		Duration: 30 * time.Second,
		// The command waits for the load, which must be running first.
		Command:       `for i in $(seq 100); do [ -e ` + shell.Quote(marker) + ` ] && break; sleep 0.05; done; printf 'Run time: %sms\n' "$BENCH_MS"`,
		CommandMetric: CommandMetric{Pattern: mustRegexp(`Run time: (\d+)ms`), Unit: time.Millisecond},
		Env:           []string{"BENCH_MS=8581"},
		Load:          "touch " + shell.Quote(marker) + "; exec sleep 600.123",
	}
	m, raw, err := w.Measure(context.Background(), shell.LocalRunner{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Numbers) != 1 || m.Numbers[0] != 8581e6 || strings.Contains(raw.Script, "8581") {
		t.Errorf("numbers %v, script %q", m.Numbers, raw.Script)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the load did not run: %v", err)
	}
	// The load was stopped: no sleep 600 is left in its group.
	out, _, _ := shell.LocalRunner{}.Run(context.Background(), shell.Cmd{Script: "pgrep -f 'sleep 600[.]123' || true"})
	if strings.TrimSpace(string(out)) != "" {
		t.Errorf("the load is still running: %s", out)
	}
}

func mustRegexp(s string) *regexp.Regexp { return regexp.MustCompile(s) }

func TestFailuresAreClassifiedByWhatFailed(t *testing.T) {
	// A benchmark that fails with "not found" in its words is a failed
	// benchmark, not a missing tool.
	w := Workload{Tool: ToolCommand, Duration: 10 * time.Second, Command: "echo 'eth0: device not found' >&2; exit 1",
		CommandMetric: CommandMetric{Pattern: mustRegexp(`(\d+)`)}}
	_, _, err := w.Measure(context.Background(), shell.LocalRunner{})
	var se *SetupError
	if errors.As(err, &se) || err == nil || !strings.Contains(err.Error(), "command: exit status 1: eth0: device not found") {
		t.Errorf("got %v", err)
	}
	// The program the shell could not find is named, whatever the tool.
	w = Workload{Tool: ToolOslat, CPUs: []int{1}, Duration: time.Second, Housekeeping: []int{0}}
	t.Setenv("PATH", t.TempDir())
	_, _, err = w.Measure(context.Background(), shell.LocalRunner{})
	if !errors.As(err, &se) || se.Msg != "taskset is not installed on the machine (Debian: apt-get install util-linux)" {
		t.Errorf("got %v", err)
	}
	// Exit 91 of a command is the command's, not "no osnoise tracer".
	t.Setenv("PATH", "/usr/bin:/bin")
	w = Workload{Tool: ToolCommand, Duration: 10 * time.Second, Command: "exit 91", CommandMetric: CommandMetric{Pattern: mustRegexp(`(\d+)`)}}
	if _, _, err = w.Measure(context.Background(), shell.LocalRunner{}); errors.As(err, &se) {
		t.Errorf("got %v", err)
	}
}

func TestALoadThatDoesNotRunIsAnError(t *testing.T) {
	w := Workload{Tool: ToolCommand, Duration: 10 * time.Second, Command: "echo 1", CommandMetric: CommandMetric{Pattern: mustRegexp(`(\d+)`)},
		Load: "no_such_load_binary --storm"}
	_, _, err := w.Measure(context.Background(), shell.LocalRunner{})
	var le *LoadError
	if !errors.As(err, &le) || !strings.Contains(le.Msg, "the background load is not running: ") || !strings.Contains(le.Msg, "no_such_load_binary: not found") {
		t.Errorf("got %v", err)
	}
	// A load that dies during the measurement spoils the sample.
	w.Load = "sleep 1.5"
	w.Command = "sleep 2; echo 1"
	if _, _, err := w.Measure(context.Background(), shell.LocalRunner{}); !errors.As(err, &le) {
		t.Errorf("got %v", err)
	}
}

func TestAHungToolIsStoppedAtItsDeadline(t *testing.T) {
	w := Workload{Tool: ToolCommand, Duration: time.Second, Command: "sleep 30; echo 1", CommandMetric: CommandMetric{Pattern: mustRegexp(`(\d+)`)}}
	start := time.Now()
	_, _, err := w.Measure(context.Background(), shell.LocalRunner{})
	if err == nil || err.Error() != "command did not finish within 1s" {
		t.Errorf("got %v", err)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("the deadline did not stop it")
	}
}

func TestWorkloadsThatCannotRunAreRefused(t *testing.T) {
	for _, c := range []struct {
		w    Workload
		want string
	}{
		{Workload{Tool: "bogus", Duration: time.Second, CPUs: []int{1}}, `unknown tool "bogus"`},
		{Workload{Tool: ToolOsnoise, Duration: time.Second, CPUs: []int{1}, Args: []string{"x"}}, "osnoise takes no priority and no arguments"},
		{Workload{Tool: ToolOsnoise, Duration: time.Second, CPUs: []int{1}, Runtime: 2 * time.Second}, "runtime 2s is longer than the tracer's 1s period"},
		{Workload{Tool: ToolOsnoise, Duration: -time.Second, CPUs: []int{1}}, "durations must be positive"},
		{Workload{Tool: ToolOsnoise, Duration: time.Second, CPUs: []int{1}, NoiseThreshold: 500 * time.Nanosecond}, "500ns is not a whole number of microseconds"},
	} {
		if _, _, err := c.w.Measure(context.Background(), shell.LocalRunner{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// TestABenchmarkThatPrintsPastTheCapIsTheLabsSetup: a command workload
// that floods its output is stopped at the runner's cap and is the lab's
// setup to fix (the job's command), not a measurement nor a verdict; the
// error says which key, how much and what to do.
func TestABenchmarkThatPrintsPastTheCapIsTheLabsSetup(t *testing.T) {
	w := Workload{Tool: ToolCommand, Duration: time.Minute, Command: "yes 1 | head -c " + strconv.Itoa(shell.MaxOutput+1) + "; sleep 600",
		CommandMetric: CommandMetric{Pattern: mustRegexp(`(\d+)`)}}
	m, _, err := w.Measure(context.Background(), shell.LocalRunner{})
	var se *SetupError
	if !errors.As(err, &se) || se.Kernel || m != nil {
		t.Fatalf("got %v, %v; want the lab's setup error", m, err)
	}
	want := "workload.command printed more than 64 MiB on its stdout, the most kept of a measurement, and was stopped: " +
		"make it print only its results (send its log to a file on the host), or print less often"
	if se.Msg != want {
		t.Errorf("error %q, want %q", se.Msg, want)
	}
}
