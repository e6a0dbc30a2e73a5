package configs

// Unit is what kind of quantity a metric is.
type Unit int

// Units of metrics.
const (
	UnitTime    Unit = iota + 1 // a latency or noise time
	UnitCount                   // events per sample (interrupts, threads)
	UnitPercent                 // a share of CPU time
	UnitNumber                  // a custom command's value without a time unit
)

func (u Unit) String() string {
	switch u {
	case UnitTime:
		return "a time"
	case UnitCount:
		return "a count"
	case UnitPercent:
		return "a percentage"
	}
	return "a number"
}

// Metric is one quantity a workload reports per CPU and sample.
type Metric struct {
	Name      string
	Unit      Unit
	Direction string // which way is worse
	About     string
}

// osnoiseMetrics are those of the osnoise tracer and of rtla osnoise.
var osnoiseMetrics = []Metric{
	{"max_single_noise", UnitTime, HigherIsBad, "longest single noise in a period (MAX SINGLE NOISE)"},
	{"noise", UnitTime, HigherIsBad, "total noise in a period (NOISE)"},
	{"availability", UnitPercent, LowerIsBad, "share of the period left to the workload (% OF CPU AVAILABLE)"},
	{"hw", UnitCount, HigherIsBad, "hardware noise events (HW)"},
	{"nmi", UnitCount, HigherIsBad, "NMIs (NMI)"},
	{"irq", UnitCount, HigherIsBad, "interrupts (IRQ)"},
	{"sirq", UnitCount, HigherIsBad, "softirqs (SIRQ; always 0 on PREEMPT_RT, where softirqs are threads)"},
	{"thread", UnitCount, HigherIsBad, "thread preemptions (THREAD)"},
}

var latencyMetrics = []Metric{
	{"max_latency", UnitTime, HigherIsBad, "worst latency of the sample"},
	{"avg_latency", UnitTime, HigherIsBad, "average latency of the sample"},
}

// toolMetrics lists each tool's metrics; the first is the default.
var toolMetrics = map[string][]Metric{
	ToolOsnoise:     osnoiseMetrics,
	ToolRtlaOsnoise: osnoiseMetrics,
	ToolRtlaTimerlat: {
		{"thread_latency", UnitTime, HigherIsBad, "worst timer latency seen by the timerlat thread"},
		{"irq_latency", UnitTime, HigherIsBad, "worst timer latency seen by the timer IRQ"},
		{"user_latency", UnitTime, HigherIsBad, "worst latency seen by a user-space thread (rtla timerlat -u)"},
	},
	ToolOslat:      latencyMetrics,
	ToolCyclictest: latencyMetrics,
	ToolCommand:    {{"value", UnitNumber, HigherIsBad, "the number taken from the command's output"}},
}

// Tools are the workload tools, in the order the docs list them.
var Tools = []string{ToolOsnoise, ToolRtlaOsnoise, ToolRtlaTimerlat, ToolOslat, ToolCyclictest, ToolCommand}

// Metrics returns the metrics a tool reports; the first is its default.
func Metrics(tool string) []Metric { return toolMetrics[tool] }

// MetricOf returns the metric of a tool by name.
func MetricOf(tool, name string) (Metric, bool) {
	for _, m := range toolMetrics[tool] {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}

// Aggregates are the ways the per-CPU values of one sample combine into
// the sample's value.
var Aggregates = []string{"max", "p99", "p90", "median", "mean", "min"}

// ReportFormats are the report formats a run can write.
var ReportFormats = []string{"text", "markdown", "json", "html", "junit"}

// InitramfsTools are the initramfs steps kbisect knows by name; any other
// value of boot.initramfs is a command run on the host.
var InitramfsTools = []string{"none", "update-initramfs", "dracut", "kernel-install"}

// Accels are the QEMU accelerators of boot.qemu.accel.
var Accels = []string{"auto", "kvm", "tcg"}

// QEMU reboots of boot.qemu.reboot: a fresh guest for every kernel, or
// kexec inside the running guest.
const (
	RebootRestart = "restart"
	RebootKexec   = "kexec"
)

// Reboots are the values of boot.qemu.reboot.
var Reboots = []string{RebootRestart, RebootKexec}

// CommandUnits are the units of a custom command's number.
var CommandUnits = []string{"", "ns", "us", "ms", "s"}
