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
	DefaultKeepKernels    = 3
	DefaultQEMUMemory     = Size(2 << 30)
	DefaultQEMUCPUs       = 2
	DefaultCacheSize      = Size(20 << 30)
	// DefaultBuildTimeout bounds each make command: a full kernel with
	// modules takes well under an hour on a lab's build machine.
	DefaultBuildTimeout   = Duration(3 * time.Hour)
	DefaultDuration       = Duration(60 * time.Second)
	DefaultCommandTimeout = Duration(10 * time.Minute)
	DefaultNoiseThreshold = Duration(time.Microsecond)
	DefaultSamplesMin     = 3
	DefaultSamplesMax     = 10
	DefaultBoots          = 1
	DefaultConfidence     = 0.95
	// DefaultSearch is the search a job file that names none gets.
	DefaultSearch = SearchPosterior
	// DefaultSearchConfidence is the probability the posterior search
	// must reach when the job file sets no verdict.confidence: a wrong
	// culprit after a night is the worst answer.
	DefaultSearchConfidence = 0.99
	DefaultFindGoodMax      = 8
	DefaultBaselineMaxAge   = Duration(7 * 24 * time.Hour)
	DefaultNightlyRounds    = 3
)

// DefaultReportFormats are written when report.formats is not set.
var DefaultReportFormats = []string{"text", "json"}

// setDefaults fills what the job files leave unset, remembering which keys
// got a default (config show marks them). A key written with a value, even
// zero, keeps it (validation then says what is wrong with it), and a key
// whose value did not decode gets no default to hide that.
func (l *loader) setDefaults() {
	j := l.job
	def := func(key string, apply func()) {
		if l.isSet(key) || l.keyFailed(key) {
			return
		}
		apply()
		j.defaulted[key] = true
	}
	h := &j.Host
	if j.Boot.Method != BootQEMU {
		def("host.port", func() { h.Port = DefaultPort })
		def("host.user", func() { h.User = DefaultUser })
		def("host.known_hosts", func() {
			h.KnownHosts = Path(filepath.Join(l.opt.Home, ".ssh", "known_hosts"))
		})
	}
	def("host.connect_timeout", func() { h.ConnectTimeout = DefaultConnectTimeout })
	def("host.keepalive", func() { h.Keepalive = DefaultKeepalive })

	b := &j.Boot
	def("boot.timeout", func() { b.Timeout = DefaultBootTimeout })
	def("boot.settle", func() { b.Settle = DefaultSettle })
	def("boot.on_failure", func() { b.OnFailure = FailureSkip })
	def("boot.initramfs", func() { b.Initramfs = "none" })
	def("boot.keep_kernels", func() { b.KeepKernels = DefaultKeepKernels })
	if b.Method == BootQEMU {
		q := &b.QEMU
		def("boot.qemu.memory", func() { q.Memory = DefaultQEMUMemory })
		def("boot.qemu.cpus", func() { q.CPUs = DefaultQEMUCPUs })
		def("boot.qemu.accel", func() { q.Accel = "auto" })
		def("boot.qemu.reboot", func() { q.Reboot = RebootRestart })
		def("machine.cpus", func() { j.Machine.CPUs = q.CPUs })
	}

	bu := &j.Build
	def("build.config", func() { bu.Config = ConfigDefconfig })
	def("build.cache_dir", func() {
		bu.CacheDir = Path(filepath.Join(l.opt.Home, ".cache", "kbisect"))
	})
	def("build.cache_size", func() { bu.CacheSize = DefaultCacheSize })
	def("build.timeout", func() { bu.Timeout = DefaultBuildTimeout })
	def("build.on_failure", func() { bu.OnFailure = FailureSkip })
	if bu.Host.Address != "" {
		bh := &bu.Host
		def("build.host.port", func() { bh.Port = DefaultPort })
		def("build.host.user", func() { bh.User = DefaultUser })
		def("build.host.known_hosts", func() {
			bh.KnownHosts = Path(filepath.Join(l.opt.Home, ".ssh", "known_hosts"))
		})
		def("build.host.connect_timeout", func() { bh.ConnectTimeout = DefaultConnectTimeout })
		def("build.host.keepalive", func() { bh.Keepalive = DefaultKeepalive })
		def("build.slots", func() { bu.Slots = 1 })
		if j.Boot.Method != BootQEMU {
			def("build.to_lab.direct", func() { bu.ToLab.Direct = true })
		}
	}

	w := &j.Workload
	def("workload.tool", func() { w.Tool = ToolOsnoise })
	if w.Tool == ToolCommand {
		def("workload.duration", func() { w.Duration = DefaultCommandTimeout })
	} else {
		def("workload.duration", func() { w.Duration = DefaultDuration })
	}
	if w.Tool == ToolOsnoise || w.Tool == ToolRtlaOsnoise {
		// Always explicit: the tools' own default changed from 5us to 1us
		// in 6.11, which a bisection across it would "find".
		def("workload.noise_threshold", func() { w.NoiseThreshold = DefaultNoiseThreshold })
	}
	// workload.cpus and load_cpus default in validate, which parses
	// boot.params first.

	v := &j.Verdict
	if ms := Metrics(w.Tool); len(ms) > 0 && !l.keyFailed("workload.tool") {
		def("verdict.metric", func() { v.Metric = ms[0].Name })
	}
	def("verdict.aggregate", func() { v.Aggregate = "max" })
	def("verdict.threshold", func() { v.Threshold = Threshold{Kind: ThresholdAuto} })
	if m, ok := MetricOf(w.Tool, v.Metric); ok {
		def("verdict.direction", func() { v.Direction = m.Direction })
	}
	def("verdict.samples.min", func() { v.Samples.Min = DefaultSamplesMin })
	def("verdict.samples.max", func() { v.Samples.Max = max(DefaultSamplesMax, v.Samples.Min) })
	def("verdict.boots", func() { v.Boots = DefaultBoots })
	def("verdict.search", func() { v.Search = DefaultSearch })
	def("verdict.confidence", func() { v.Confidence = DefaultConfidence })

	r := &j.Report
	def("report.formats", func() { r.Formats = append([]string(nil), DefaultReportFormats...) })

	def("find_good.max_kernels", func() { j.FindGood.MaxKernels = DefaultFindGoodMax })
	def("nightly.baseline_max_age", func() { j.Nightly.BaselineMaxAge = DefaultBaselineMaxAge })
	def("nightly.rounds", func() { j.Nightly.Rounds = DefaultNightlyRounds })
}

// isSet reports whether a job file set key (possibly to its zero value).
func (l *loader) isSet(key string) bool {
	_, ok := l.job.pos[key]
	return ok
}
