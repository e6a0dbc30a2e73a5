package configs

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

// APIVersion is the only job file version this kbisect reads.
const APIVersion = "kbisect/v1"

// Kinds of job files: a machine's job, and shared defaults it includes.
const (
	KindJob      = "Job"
	KindDefaults = "Defaults"
)

// Job is one lab machine's job file after includes, defaults and
// validation. Field tags are the YAML keys; docs/job-file.md documents each.
type Job struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Include    []string `yaml:"include,omitempty"`

	Machine  Machine  `yaml:"machine"`
	Host     Host     `yaml:"host"`
	Boot     Boot     `yaml:"boot"`
	Build    Build    `yaml:"build"`
	Workload Workload `yaml:"workload"`
	Verdict  Verdict  `yaml:"verdict"`
	Report   Report   `yaml:"report"`
	FindGood FindGood `yaml:"find_good"`
	Nightly  Nightly  `yaml:"nightly"`

	// File is the job file as named when it was loaded.
	File string `yaml:"-"`
	// Warnings are what validation found doubtful but not wrong.
	Warnings []Diagnostic `yaml:"-"`

	pos       map[string]Pos
	defaulted map[string]bool
}

// Machine describes the lab machine as far as it is known.
type Machine struct {
	Name           string `yaml:"name"`
	Description    string `yaml:"description,omitempty"`
	Arch           string `yaml:"arch,omitempty"`
	CPUs           int    `yaml:"cpus,omitempty"`
	Sockets        int    `yaml:"sockets,omitempty"`
	ThreadsPerCore int    `yaml:"threads_per_core,omitempty"`
	NUMANodes      []CPUs `yaml:"numa_nodes,omitempty"`
}

// Host is how kbisect reaches the machine over SSH.
type Host struct {
	Address          string   `yaml:"address,omitempty"`
	Port             int      `yaml:"port,omitempty"`
	User             string   `yaml:"user,omitempty"`
	Identity         Path     `yaml:"identity,omitempty"`
	KnownHosts       Path     `yaml:"known_hosts,omitempty"`
	AcceptNewHostKey bool     `yaml:"accept_new_host_key,omitempty"`
	Jump             string   `yaml:"jump,omitempty"`
	Sudo             bool     `yaml:"sudo,omitempty"`
	ConnectTimeout   Duration `yaml:"connect_timeout,omitempty"`
	Keepalive        Duration `yaml:"keepalive"` // 0s: none
}

// Boot methods.
const (
	BootKexec  = "kexec"
	BootGrub   = "grub"
	BootScript = "script"
	BootQEMU   = "qemu"
)

// What a kernel failure (build or boot) means for the bisection.
const (
	FailureSkip = "skip"
	FailureBad  = "bad"
)

// Boot says how a test kernel is installed and booted, with which
// parameters, and how the machine is recovered when it hangs.
type Boot struct {
	Method       string `yaml:"method"`
	Params       string `yaml:"params,omitempty"`
	ExtraCmdline string `yaml:"extra_cmdline,omitempty"`
	// BaseCmdline, when set, is the command line the job's parameters
	// are added to; else the host's own kernel's, recorded at first
	// contact.
	BaseCmdline string   `yaml:"base_cmdline,omitempty"`
	Initramfs   Command  `yaml:"initramfs,omitempty"`
	Timeout     Duration `yaml:"timeout,omitempty"`
	Settle      Duration `yaml:"settle"`
	Script      Command  `yaml:"script,omitempty"`
	PowerCycle  Command  `yaml:"power_cycle,omitempty"`
	Console     Command  `yaml:"console,omitempty"`
	OnFailure   string   `yaml:"on_failure,omitempty"`
	KeepKernels int      `yaml:"keep_kernels,omitempty"`
	QEMU        QEMU     `yaml:"qemu,omitempty"`
}

// QEMU describes the local virtual machine of boot method qemu.
type QEMU struct {
	Image  Path     `yaml:"image,omitempty"`
	Memory Size     `yaml:"memory,omitempty"`
	CPUs   int      `yaml:"cpus,omitempty"`
	Accel  string   `yaml:"accel,omitempty"`
	Reboot string   `yaml:"reboot,omitempty"`
	Args   []string `yaml:"args,omitempty"`
}

// Build says how the kernel of a commit is configured and built.
type Build struct {
	Tree      Path              `yaml:"tree"`
	Config    string            `yaml:"config,omitempty"`
	Fragments []Path            `yaml:"fragments,omitempty"`
	Options   []string          `yaml:"options,omitempty"`
	MakeVars  map[string]string `yaml:"make_vars,omitempty"`
	Jobs      int               `yaml:"jobs,omitempty"`
	CCache    bool              `yaml:"ccache,omitempty"`
	// CompilerWrapper is a compile farm's client (distcc, icecc) that
	// runs the compiles; CCacheRemote is ccache's remote storage.
	CompilerWrapper string     `yaml:"compiler_wrapper,omitempty"`
	CCacheRemote    StorageURL `yaml:"ccache_remote,omitempty"`
	CacheDir        Path       `yaml:"cache_dir,omitempty"`
	// CacheURL is another controller's cache directory served over HTTP,
	// asked for a kernel before it is built.
	CacheURL  StorageURL `yaml:"cache_url,omitempty"`
	CacheSize Size       `yaml:"cache_size,omitempty"`
	Timeout   Duration   `yaml:"timeout,omitempty"`
	OnFailure string     `yaml:"on_failure,omitempty"`
	// Host is a build server reached over SSH that builds the kernels
	// the cache lacks, in Slots slots, in its own clone RemoteTree;
	// HostKbisect a kbisect installed there, when this one's executable
	// cannot run there (another OS or architecture).
	Host        Host   `yaml:"host,omitempty"`
	RemoteTree  string `yaml:"remote_tree,omitempty"`
	Slots       int    `yaml:"slots,omitempty"`
	HostKbisect string `yaml:"host_kbisect,omitempty"`
	// ToLab says how the build server sends a kernel to the lab host
	// itself, rather than through this controller.
	ToLab ToLab `yaml:"to_lab,omitempty"`
}

// ToLab is the lab host as the build server reaches it: its address and
// port there (by default host.address and host.port), and the key it
// signs in with: a file on the server (Identity), this controller's key
// lent for the copy (ForwardAgent), or else the server's own ssh set-up.
type ToLab struct {
	Direct       bool   `yaml:"direct"`
	Address      string `yaml:"address,omitempty"`
	Port         int    `yaml:"port,omitempty"`
	Identity     string `yaml:"identity,omitempty"`
	ForwardAgent bool   `yaml:"forward_agent,omitempty"`
}

// Base configurations that are not files: make's defconfig, the running
// config of the lab host, and (see IsMakeConfig) other make targets.
const (
	ConfigDefconfig = "defconfig"
	ConfigHost      = "host"
)

var makeConfigTarget = regexp.MustCompile(`^(defconfig|tinyconfig|allnoconfig|[a-z0-9_.-]+_defconfig)$`)

// IsMakeConfig reports whether build.config names a make target that
// writes a base config (defconfig, tinyconfig, allnoconfig,
// x86_64_defconfig, …) rather than a file. build.config is then a make
// target, "host", or else the absolute path of a config file.
func IsMakeConfig(s string) bool { return makeConfigTarget.MatchString(s) }

// Workload tools.
const (
	ToolOsnoise      = "osnoise"
	ToolRtlaOsnoise  = "rtla-osnoise"
	ToolRtlaTimerlat = "rtla-timerlat"
	ToolOslat        = "oslat"
	ToolCyclictest   = "cyclictest"
	ToolCommand      = "command"
)

// Workload is what runs on the isolated CPUs to measure their noise.
type Workload struct {
	Tool           string   `yaml:"tool"`
	CPUs           CPUs     `yaml:"cpus,omitempty"`
	Duration       Duration `yaml:"duration,omitempty"`
	Period         Duration `yaml:"period,omitempty"`
	Runtime        Duration `yaml:"runtime,omitempty"`
	NoiseThreshold Duration `yaml:"noise_threshold,omitempty"`
	Priority       int      `yaml:"priority,omitempty"`
	Args           []string `yaml:"args,omitempty"`
	Command        Command  `yaml:"command,omitempty"`
	Pattern        string   `yaml:"pattern,omitempty"`
	JSONPath       string   `yaml:"json_path,omitempty"`
	Unit           string   `yaml:"unit,omitempty"`
	Load           Command  `yaml:"load,omitempty"`
	LoadCPUs       CPUs     `yaml:"load_cpus,omitempty"`
}

// Directions of a metric: which way is worse.
const (
	HigherIsBad = "higher-is-bad"
	LowerIsBad  = "lower-is-bad"
)

// Verdict is the rule that turns samples into good, bad or unsure.
type Verdict struct {
	Metric     string    `yaml:"metric"`
	Aggregate  string    `yaml:"aggregate,omitempty"`
	Threshold  Threshold `yaml:"threshold"`
	Direction  string    `yaml:"direction,omitempty"`
	Samples    Samples   `yaml:"samples,omitempty"`
	Boots      int       `yaml:"boots,omitempty"`
	Confidence float64   `yaml:"confidence,omitempty"`
	// Search is how the first bad commit is searched for: "posterior"
	// (boots as evidence, a posterior over the commits, the answer with
	// its probability) or "rule" (git's bisection, each commit decided by
	// the sequential rule).
	Search string `yaml:"search,omitempty"`
	// MaxBoots is the posterior search's budget of boots (0: 6 a step
	// git would take, plus 20); when it runs out the run is inconclusive.
	MaxBoots int `yaml:"max_boots,omitempty"`
}

// The searches.
const (
	SearchPosterior = "posterior"
	SearchRule      = "rule"
)

// Samples bounds how many samples one commit gets: at least Min, and up
// to Max while the verdict is unsure.
type Samples struct {
	Min int `yaml:"min"`
	Max int `yaml:"max"`
}

// FindGood says whether and how far a run walks back along the release
// tags when its good endpoint measures bad (kbisect run --find-good).
type FindGood struct {
	// Enabled turns the walk on or off; when a job file does not set it,
	// it is on when kbisect runs on a terminal and off otherwise (CI,
	// cron): a walk builds and measures kernels nobody asked for.
	Enabled     bool `yaml:"enabled,omitempty"`
	MaxKernels  int  `yaml:"max_kernels,omitempty"`
	OlderSeries int  `yaml:"older_series,omitempty"`
}

// Nightly says how kbisect nightly judges a new release against the
// machine's last good one.
type Nightly struct {
	// BaselineMaxAge is how old the last good release's measurement may
	// be: an older one is measured again, beside the new release in
	// alternating rounds, so that a machine that drifted is not taken for
	// a kernel that regressed (0: every night a release is new).
	BaselineMaxAge Duration `yaml:"baseline_max_age,omitempty"`
	// Rounds is how many boots each of the two gets when they alternate.
	Rounds int `yaml:"rounds,omitempty"`
}

// Report says which reports a run writes and where.
type Report struct {
	Formats []string `yaml:"formats,omitempty"`
	Dir     Path     `yaml:"dir,omitempty"`
}

// Pos returns where key (e.g. "workload.cpus", "build.fragments[1]") was
// set, and false when the value is a default or absent.
func (j *Job) Pos(key string) (Pos, bool) {
	p, ok := j.pos[key]
	return p, ok
}

// Defaulted reports whether key got its value from kbisect's defaults
// rather than from a job file.
func (j *Job) Defaulted(key string) bool { return j.defaulted[key] }

// commandKeys are the keys whose values are shell commands, the only ones
// that may use ${NAME}.
var commandKeys = []string{"boot.script", "boot.power_cycle", "boot.console", "boot.initramfs", "workload.command", "workload.load"}

// Commands returns the job's shell commands by key ("boot.power_cycle"),
// for what treats them alike: environment checks, display.
func (j *Job) Commands() map[string]Command {
	return map[string]Command{
		"boot.script":      j.Boot.Script,
		"boot.power_cycle": j.Boot.PowerCycle,
		"boot.console":     j.Boot.Console,
		"boot.initramfs":   j.Boot.Initramfs,
		"workload.command": j.Workload.Command,
		"workload.load":    j.Workload.Load,
	}
}

// CheckEnv returns an error naming the ${NAME} variables that the job's
// commands use and the environment lacks; a run checks it before starting.
func (j *Job) CheckEnv(lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var missing []string
	for key, refs := range j.envKeys() {
		var unset []string
		for _, name := range refs {
			if _, ok := lookup(name); !ok {
				unset = append(unset, name)
			}
		}
		if len(unset) > 0 {
			missing = append(missing, fmt.Sprintf("%s: environment variable %s is not set", key, strings.Join(unset, ", ")))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	return fmt.Errorf("%s: %s", j.File, strings.Join(missing, "; "))
}

// SearchConfidence is the probability the posterior search must reach:
// verdict.confidence when the job file sets it, else 0.99 (the 0.95 the
// rule and kbisect ab default to is too little to name a culprit).
func (j *Job) SearchConfidence() float64 {
	if j.Defaulted("verdict.confidence") {
		return DefaultSearchConfidence
	}
	return j.Verdict.Confidence
}
