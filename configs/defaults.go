package configs

import (
	"path/filepath"
	"time"
)

// Defaults that are not per tool or per metric. docs/job-file.md states
// each; TestDocumentedDefaultsAreTheDefaults keeps the two in step.
const (
	DefaultPort           = 22
	DefaultUser           = "root"
	DefaultConnectTimeout = Duration(30 * time.Second)
	DefaultKeepalive      = Duration(15 * time.Second)
	DefaultBootTimeout    = Duration(10 * time.Minute)
	DefaultSettle         = Duration(30 * time.Second)
	DefaultQEMUMemory     = Size(2 << 30)
	DefaultQEMUCPUs       = 2
	DefaultCacheSize      = Size(20 << 30)
	DefaultDuration       = Duration(60 * time.Second)
	DefaultCommandTimeout = Duration(10 * time.Minute)
	DefaultNoiseThreshold = Duration(time.Microsecond)
	DefaultSamplesMin     = 3
	DefaultSamplesMax     = 10
	DefaultBoots          = 1
	DefaultConfidence     = 0.95
)

// DefaultReportFormats are written when report.formats is not set.
var DefaultReportFormats = []string{"text", "json"}

// setDefaults fills what the job files left unset, remembering which keys
// got a default (config show marks them).
func (l *loader) setDefaults() {
	j := l.job
	def := func(key string, unset bool, apply func()) {
		if unset {
			apply()
			j.defaulted[key] = true
		}
	}
	h := &j.Host
	if j.Boot.Method != BootQEMU {
		def("host.port", h.Port == 0, func() { h.Port = DefaultPort })
		def("host.user", h.User == "", func() { h.User = DefaultUser })
		def("host.known_hosts", h.KnownHosts == "", func() {
			h.KnownHosts = Path(filepath.Join(l.opt.Home, ".ssh", "known_hosts"))
		})
	}
	def("host.connect_timeout", h.ConnectTimeout == 0, func() { h.ConnectTimeout = DefaultConnectTimeout })
	def("host.keepalive", !l.isSet("host.keepalive"), func() { h.Keepalive = DefaultKeepalive })

	b := &j.Boot
	def("boot.timeout", b.Timeout == 0, func() { b.Timeout = DefaultBootTimeout })
	def("boot.settle", !l.isSet("boot.settle"), func() { b.Settle = DefaultSettle })
	def("boot.on_failure", b.OnFailure == "", func() { b.OnFailure = FailureSkip })
	def("boot.initramfs", b.Initramfs == "", func() { b.Initramfs = "none" })
	if b.Method == BootQEMU {
		q := &b.QEMU
		def("boot.qemu.memory", q.Memory == 0, func() { q.Memory = DefaultQEMUMemory })
		def("boot.qemu.cpus", q.CPUs == 0, func() { q.CPUs = DefaultQEMUCPUs })
		def("boot.qemu.accel", q.Accel == "", func() { q.Accel = "auto" })
		def("machine.cpus", j.Machine.CPUs == 0, func() { j.Machine.CPUs = q.CPUs })
	}

	bu := &j.Build
	def("build.config", bu.Config == "", func() { bu.Config = ConfigDefconfig })
	def("build.cache_dir", bu.CacheDir == "", func() {
		bu.CacheDir = Path(filepath.Join(l.opt.Home, ".cache", "kbisect"))
	})
	def("build.cache_size", bu.CacheSize == 0, func() { bu.CacheSize = DefaultCacheSize })
	def("build.on_failure", bu.OnFailure == "", func() { bu.OnFailure = FailureSkip })

	w := &j.Workload
	def("workload.tool", w.Tool == "", func() { w.Tool = ToolOsnoise })
	if w.Tool == ToolCommand {
		def("workload.duration", w.Duration == 0, func() { w.Duration = DefaultCommandTimeout })
	} else {
		def("workload.duration", w.Duration == 0, func() { w.Duration = DefaultDuration })
	}
	if w.Tool == ToolOsnoise || w.Tool == ToolRtlaOsnoise {
		// Always explicit: the tools' own default changed from 5us to 1us
		// in 6.11, which a bisection across it would "find".
		def("workload.noise_threshold", w.NoiseThreshold == 0, func() { w.NoiseThreshold = DefaultNoiseThreshold })
	}
	// workload.cpus and load_cpus default in validate, which parses
	// boot.params first.

	v := &j.Verdict
	if ms := Metrics(w.Tool); len(ms) > 0 {
		def("verdict.metric", v.Metric == "", func() { v.Metric = ms[0].Name })
	}
	def("verdict.aggregate", v.Aggregate == "", func() { v.Aggregate = "max" })
	def("verdict.threshold", v.Threshold.Kind == ThresholdUnset, func() { v.Threshold = Threshold{Kind: ThresholdAuto} })
	if m, ok := MetricOf(w.Tool, v.Metric); ok {
		def("verdict.direction", v.Direction == "", func() { v.Direction = m.Direction })
	}
	def("verdict.samples.min", v.Samples.Min == 0, func() { v.Samples.Min = DefaultSamplesMin })
	def("verdict.samples.max", v.Samples.Max == 0, func() { v.Samples.Max = max(DefaultSamplesMax, v.Samples.Min) })
	def("verdict.boots", v.Boots == 0, func() { v.Boots = DefaultBoots })
	def("verdict.confidence", v.Confidence == 0, func() { v.Confidence = DefaultConfidence })

	r := &j.Report
	def("report.formats", r.Formats == nil, func() { r.Formats = append([]string(nil), DefaultReportFormats...) })
}

// isSet reports whether a job file set key (possibly to its zero value).
func (l *loader) isSet(key string) bool {
	_, ok := l.job.pos[key]
	return ok
}
