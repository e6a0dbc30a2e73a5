package noise

import (
	"fmt"
	"sort"
	"time"
)

// Tools whose output noise parses; the names are the job file's
// workload.tool values.
const (
	ToolOsnoise      = "osnoise"
	ToolRtlaOsnoise  = "rtla-osnoise"
	ToolRtlaTimerlat = "rtla-timerlat"
	ToolOslat        = "oslat"
	ToolCyclictest   = "cyclictest"
	ToolCommand      = "command"
)

// maxCPU bounds CPU numbers and thread indices read from outputs: Linux
// supports at most 8192 CPUs, so anything larger is not a CPU.
const maxCPU = 1 << 16

// Percent is a share in percent (0 to 100), e.g. the CPU time left to the
// workload.
type Percent float64

// Count is a number of events (interrupts, thread preemptions, samples).
type Count int64

// Measurement is what one run of a workload measured: one result per CPU.
type Measurement struct {
	Tool string `json:"tool"`
	// Version is the tool's version when its output says (rtla, rt-tests).
	Version string `json:"version,omitempty"`
	// Duration is how long the tool measured, when its output says.
	Duration time.Duration `json:"duration_ns,omitempty"`
	// CPUs holds one result per CPU, sorted by CPU number.
	CPUs []CPU `json:"cpus"`
	// StopHit says the tool stopped on its own threshold ("hit stop
	// tracing", oslat's trace threshold): the numbers cover less than the
	// duration asked for.
	StopHit bool `json:"stop_hit,omitempty"`
	// Tainted is the osnoise tracer's "# osnoise is tainted!": the kernel
	// found its own accounting inconsistent, so the run is not evidence.
	Tainted bool `json:"tainted,omitempty"`
	// Numbers are a custom command's numbers, in Unit (nanoseconds when the
	// command's unit is a time, else as printed); the command has no CPUs.
	Numbers []float64 `json:"numbers,omitempty"`
	Unit    string    `json:"unit,omitempty"`
	// Warnings are facts about the run a reader should know (lost events,
	// a CPU asked for that reported nothing).
	Warnings []string `json:"warnings,omitempty"`
}

// CPU is one CPU's result. A tool fills the fields it reports: Osnoise
// for the osnoise tracer and rtla osnoise, Latency (and IRQLatency,
// UserLatency for timerlat) for the latency tools.
type CPU struct {
	CPU     int      `json:"cpu"`
	Osnoise *Osnoise `json:"osnoise,omitempty"`
	// Latency is oslat's and cyclictest's latency, and timerlat's as seen
	// by its kernel thread.
	Latency *Latency `json:"latency,omitempty"`
	// IRQLatency is timerlat's latency as seen by the timer IRQ.
	IRQLatency *Latency `json:"irq_latency,omitempty"`
	// UserLatency is timerlat's latency as seen by a user-space thread
	// (rtla timerlat -u, the default of rtla 6.10 and newer).
	UserLatency *Latency `json:"user_latency,omitempty"`
}

// Osnoise is the osnoise tracer's account of one CPU over one or more
// periods.
type Osnoise struct {
	// Periods is the number of per-period samples summed here.
	Periods int `json:"periods"`
	// Runtime is the time the measuring thread ran, summed over periods.
	Runtime time.Duration `json:"runtime_ns"`
	// Noise is the time stolen from it, summed over periods.
	Noise time.Duration `json:"noise_ns"`
	// MaxNoise is the worst total noise of one period.
	MaxNoise time.Duration `json:"max_noise_ns"`
	// MaxSingle is the longest single interruption.
	MaxSingle time.Duration `json:"max_single_ns"`
	// Available is the share of Runtime left to the thread, as the kernel
	// prints it (truncated to 5 decimals); MinAvailable is its worst period.
	Available    Percent `json:"available"`
	MinAvailable Percent `json:"min_available"`
	// The interference counters, summed over periods: noise the CPU did
	// not see coming from the kernel (HW: SMIs, hypervisor, SMT sibling),
	// NMIs, hard IRQs, softirqs (always 0 on PREEMPT_RT, where they are
	// threads) and switches to other threads.
	HW Count `json:"hw"`
	// NoHW says the output did not have the HW column (the seed's table).
	NoHW   bool  `json:"no_hw,omitempty"`
	NMI    Count `json:"nmi"`
	IRQ    Count `json:"irq"`
	SIRQ   Count `json:"sirq"`
	Thread Count `json:"thread"`
}

// Latency is a latency tool's account of one CPU.
type Latency struct {
	Samples Count         `json:"samples"`
	Min     time.Duration `json:"min_ns"`
	Avg     time.Duration `json:"avg_ns"`
	Max     time.Duration `json:"max_ns"`
	// Histogram holds the tool's buckets when it printed them, in order.
	Histogram []Bucket `json:"histogram,omitempty"`
	// Overflow counts samples beyond the last bucket; Max still has the
	// true maximum.
	Overflow Count `json:"overflow,omitempty"`
}

// Bucket is one histogram bucket: Count samples of at most Upper.
type Bucket struct {
	Upper time.Duration `json:"upper_ns"`
	Count Count         `json:"count"`
}

// Usable says whether the measurement can be evidence about a kernel: not
// when the kernel found its own accounting inconsistent (tainted), nor
// when the tool stopped before the duration asked for.
func (m *Measurement) Usable() error {
	switch {
	case m.Tainted:
		return &UnusableError{"osnoise is tainted: the kernel found its own noise accounting inconsistent"}
	case m.StopHit:
		return &UnusableError{"the tool stopped tracing before the end (kbisect turns its stop thresholds off: did something else stop it?)"}
	}
	return nil
}

// UnusableError is a measurement that ran but is no evidence; measuring
// again is the answer.
type UnusableError struct{ Msg string }

func (e *UnusableError) Error() string { return e.Msg }

// sortCPUs orders the results by CPU number.
func (m *Measurement) sortCPUs() {
	sort.Slice(m.CPUs, func(i, j int) bool { return m.CPUs[i].CPU < m.CPUs[j].CPU })
}

// cpu returns the result of CPU n, adding it when absent.
func (m *Measurement) cpu(n int) *CPU {
	for i := range m.CPUs {
		if m.CPUs[i].CPU == n {
			return &m.CPUs[i]
		}
	}
	m.CPUs = append(m.CPUs, CPU{CPU: n})
	return &m.CPUs[len(m.CPUs)-1]
}

// ParseError is malformed or truncated tool output: which line, and why.
type ParseError struct {
	Tool string
	Line int // 1-based; 0 when the problem is the whole output
	Text string
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s output: %s", e.Tool, e.Msg)
	}
	return fmt.Sprintf("%s output, line %d: %s (%q)", e.Tool, e.Line, e.Msg, clip(e.Text))
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
