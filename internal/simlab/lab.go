// Package simlab is kbisect's simulated lab: a generated kernel-like git
// tree with a planted noise regression, built by a real make and gcc, and
// an emulated lab host (internal/simhost) that speaks SSH, installs and
// kexecs the kernels built from it, and answers the osnoise tracer with
// the noise the booted kernel carries. A job file ties them together. It
// serves the tests of the whole per-commit pipeline and kbisect demo;
// nothing in it sleeps for the time it simulates.
//
// It may import internal/simhost, internal/testrepo and the internal
// helpers; only tests, the demo and simulate may import it.
package simlab

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"kbisect/internal/commitid"
	"kbisect/internal/simhost"
)

// The simulated machine: the dual-socket server of the first seed
// report, running a Debian PREEMPT_RT kernel.
const (
	CPUs           = 64
	IsolatedCPUs   = "1-16,33-48"
	BootParams     = "nohz_full=1-16,33-48 isolcpus=nohz,domain,managed_irq,1-16,33-48 rcu_nocbs=1-16,33-48 irqaffinity=0,17-32,49-63"
	DefaultRelease = "6.1.0-28-rt-amd64"
	// DefaultMetric and DefaultThreshold are the job's verdict when the
	// bad kernels take the seed's interrupt storm and the good ones do
	// not (the default levels, 3 µs and 17 µs), as in
	// configs/system-0.yaml: the noise per period, quiet kernels tens of
	// µs, the storm ~49 ms.
	DefaultMetric    = "noise"
	DefaultThreshold = time.Millisecond
)

// Fragment is the config fragment the lab's job merges over tinyconfig:
// what configs/fragments/preempt-rt.config asks of a real kernel, all of
// which the simulated tree's Kconfig has.
const Fragment = `# PREEMPT_RT with CPU isolation and the noise tracers (the simulated
# tree's Kconfig has each of them, with its 6.12 dependencies).
CONFIG_EXPERT=y
CONFIG_PREEMPT_RT=y
CONFIG_NO_HZ_FULL=y
CONFIG_RCU_NOCB_CPU=y
CONFIG_CPU_ISOLATION=y
CONFIG_HIGH_RES_TIMERS=y
CONFIG_FTRACE=y
CONFIG_OSNOISE_TRACER=y
CONFIG_TIMERLAT_TRACER=y
CONFIG_HIST_TRIGGERS=y
CONFIG_IKCONFIG=y
CONFIG_IKCONFIG_PROC=y
CONFIG_KEXEC=y
`

// Lab is a simulated lab: a generated kernel tree, an emulated host
// running its default kernel, and a job file for both. Close stops the
// host; the files stay in Dir.
type Lab struct {
	Dir  string
	Tree *Tree
	Host *simhost.Host
	// JobFile is the job (apiVersion kbisect/v1) that builds the tree's
	// kernels and tests them on the host; Fragment, KnownHosts,
	// Identity and CacheDir are the files and directories it names.
	JobFile    string
	Fragment   string
	KnownHosts string
	Identity   string
	CacheDir   string
	// Default is the kernel the host runs until another boots, and after
	// a power cycle.
	Default simhost.Kernel
	// Metric and Threshold are the job's verdict: DefaultMetric and
	// DefaultThreshold when only the bad kernels storm; otherwise (or
	// with Options.NoStorm) the
	// longest single noise, with a threshold at the geometric mean of
	// the levels.
	Metric    string
	Threshold time.Duration
	// Hosts are the identical machines AddHost added, each with its job
	// file (the first host is Host, with JobFile).
	Hosts    []*simhost.Host
	JobFiles []string
	// Resumed says the lab was made before in Dir and started again: the
	// same tree, hosts with the same keys and ports, the same job files.
	Resumed bool

	opt  Options
	name string // the machine's name in the job: simlab, simlab-2, …
}

// New makes a lab in dir (made if missing): the tree in dir/tree, the
// host's keys in dir/host, the job in dir/job.yaml, the build cache in
// dir/cache, and what it was made with in dir/lab.json. A dir that holds
// a lab made with the same options already is opened again (Resumed),
// its hosts started with their keys and ports; one made with others is
// an *OtherLabError.
func New(dir string, opt Options) (*Lab, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if err := Requirements(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("simlab: %v", err)
	}
	if l, err := reopen(dir, opt); l != nil || err != nil {
		return l, err
	}
	l := labAt(dir, opt)
	if l.Tree, err = NewTree(filepath.Join(dir, "tree"), opt); err != nil {
		return nil, err
	}
	hostDir := filepath.Join(dir, "host")
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		return nil, fmt.Errorf("simlab: %v", err)
	}
	if l.Host, err = simhost.New(hostDir, l.Default); err != nil {
		return nil, err
	}
	if err := l.setUp(l.Host, uint64(opt.Seed)); err != nil {
		l.Host.Close()
		return nil, err
	}
	l.Identity = l.Host.Identity
	for path, text := range map[string]string{
		l.KnownHosts: l.Host.KnownHostsLine + "\n",
		l.Fragment:   Fragment,
		l.JobFile:    l.job(opt),
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			l.Host.Close()
			return nil, fmt.Errorf("simlab: %v", err)
		}
	}
	if err := l.save(); err != nil {
		l.Host.Close()
		return nil, err
	}
	return l, nil
}

// labAt is the lab in dir, its files named and its machine's kernel and
// verdict set, before anything is made or started.
func labAt(dir string, opt Options) *Lab {
	l := &Lab{Dir: dir, JobFile: filepath.Join(dir, "job.yaml"), Fragment: filepath.Join(dir, "rt.config"),
		KnownHosts: filepath.Join(dir, "known_hosts"), CacheDir: filepath.Join(dir, "cache"), opt: opt}
	l.Default = DefaultKernel(opt.GoodNoise)
	l.Metric, l.Threshold = labMetric(opt)
	return l
}

// labMetric is the job's verdict: DefaultMetric and DefaultThreshold when
// only the bad kernels storm; otherwise the longest single noise with a
// threshold between the levels.
func labMetric(opt Options) (string, time.Duration) {
	if opt.NoStorm || !(opt.GoodNoise < simhost.StormLevel && opt.BadNoise >= simhost.StormLevel) {
		return "max_single_noise", threshold(opt.GoodNoise, opt.BadNoise)
	}
	return DefaultMetric, DefaultThreshold
}

// setUp gives a host the lab's CPUs, isolation and noise.
func (l *Lab) setUp(h *simhost.Host, seed uint64) error {
	h.SetCPUs(CPUs)
	h.SetSeed(seed)
	h.SetNoStorm(l.opt.NoStorm)
	return h.SetNoiseModel(l.opt.hostNoise())
}

// Requirements says which tools the lab needs and this machine lacks:
// git for the tree; make, gcc, awk and nm to build its kernels.
func Requirements() error {
	var missing []string
	for _, tool := range []string{"git", "make", "gcc", "awk", "nm"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("simlab: the simulated lab needs %s on this machine (Debian: apt-get install git make gcc binutils)", strings.Join(missing, ", "))
	}
	return nil
}

// Close stops the emulated hosts.
func (l *Lab) Close() error {
	for _, h := range l.Hosts {
		h.Close()
	}
	return l.Host.Close()
}

// AddHost starts another emulated machine identical to the first (the
// same default kernel, CPUs and isolation; its own keys, port and noise
// seed) and writes its job file, dir/job-<n>.yaml: the same job but for
// the host section, as a lab with several identical machines has.
func (l *Lab) AddHost() (string, *simhost.Host, error) {
	n := len(l.Hosts) + 2
	hostDir := filepath.Join(l.Dir, fmt.Sprintf("host-%d", n))
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		return "", nil, fmt.Errorf("simlab: %v", err)
	}
	h, err := simhost.New(hostDir, l.Default)
	if err != nil {
		return "", nil, err
	}
	if err := l.setUp(h, uint64(l.opt.Seed)*1000+uint64(n)); err != nil {
		h.Close()
		return "", nil, err
	}
	other := *l
	other.Host, other.Identity = h, h.Identity
	other.KnownHosts = filepath.Join(hostDir, "known_hosts")
	other.JobFile = filepath.Join(l.Dir, fmt.Sprintf("job-%d.yaml", n))
	other.Hosts, other.name = nil, fmt.Sprintf("simlab-%d", n)
	for path, text := range map[string]string{
		other.KnownHosts: h.KnownHostsLine + "\n",
		other.JobFile:    other.job(l.opt),
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			h.Close()
			return "", nil, fmt.Errorf("simlab: %v", err)
		}
	}
	l.Hosts = append(l.Hosts, h)
	l.JobFiles = append(l.JobFiles, other.JobFile)
	if err := l.save(); err != nil {
		return "", nil, err
	}
	return other.JobFile, h, nil
}

// hostNoise is the noise the lab's hosts measure with.
func (o Options) hostNoise() simhost.NoiseModel {
	return simhost.NoiseModel{Model: o.Noise, Good: o.GoodNoise, Bad: o.BadNoise}
}

// DefaultKernel is the kernel the lab's host runs when nothing else
// does: Debian's 6.1 PREEMPT_RT kernel, booted with the isolation
// parameters, at the given noise level.
func DefaultKernel(noise time.Duration) simhost.Kernel {
	return simhost.Kernel{
		Release: DefaultRelease,
		Version: "#1 SMP PREEMPT_RT Debian 6.1.119-1 (2024-11-22)",
		Cmdline: "BOOT_IMAGE=/boot/vmlinuz-" + DefaultRelease + " root=/dev/mapper/system--0--vg-root ro quiet " + BootParams,
		Config: `#
# Automatically generated file; DO NOT EDIT.
# Linux/x86 6.1.119 Kernel Configuration
#
CONFIG_CC_VERSION_TEXT="gcc-12 (Debian 12.2.0-14) 12.2.0"
CONFIG_LOCALVERSION=""
# CONFIG_LOCALVERSION_AUTO is not set
CONFIG_EXPERT=y
CONFIG_EPOLL=y
CONFIG_CPU_ISOLATION=y
CONFIG_NO_HZ_FULL=y
CONFIG_HIGH_RES_TIMERS=y
CONFIG_RCU_NOCB_CPU=y
CONFIG_PREEMPT_RT=y
CONFIG_MODULES=y
CONFIG_64BIT=y
CONFIG_SMP=y
CONFIG_NR_CPUS=8192
CONFIG_HZ_250=y
CONFIG_KEXEC=y
CONFIG_FTRACE=y
CONFIG_OSNOISE_TRACER=y
CONFIG_TIMERLAT_TRACER=y
CONFIG_HIST_TRIGGERS=y
`,
		Noise: noise,
	}
}

// job is the lab's job file.
func (l *Lab) job(opt Options) string {
	q := strconv.Quote
	return fmt.Sprintf(`# kbisect's simulated lab: a generated kernel tree with a regression
# planted at %s, and an emulated 64-CPU PREEMPT_RT host on 127.0.0.1 that
# boots the kernels built from it and answers the osnoise tracer at once.
#
#   kbisect run --job %s --good %s --bad %s
apiVersion: kbisect/v1
kind: Job

machine:
  name: %s
  description: emulated dual-socket PREEMPT_RT server, CPUs 0-63, isolated %s
  arch: x86_64
  cpus: %d
  sockets: 2
  numa_nodes: [0-31, 32-63]

host:
  address: 127.0.0.1
  port: %d
  user: root
  identity: %s
  known_hosts: %s
  connect_timeout: 5s
  keepalive: 5s

boot:
  method: kexec
  params: %s
  timeout: 30s           # the least a job may say; the emulated host boots in under a second
  settle: 0s
  power_cycle: %s

build:
  tree: %s
  config: tinyconfig
  fragments: [%s]
  cache_dir: %s

workload:
  tool: osnoise
  cpus: %s
  duration: %s
  period: 1s
  runtime: 950ms
  noise_threshold: 1us

verdict:
  metric: %s
  aggregate: max
  threshold: %s           # longest single noise: good kernels ~%s, bad ones ~%s
  samples: {min: 3, max: 5}
`, commitid.Short(l.Tree.Regression), q(l.JobFile), l.Tree.Good, l.Tree.Bad, l.machineName(), IsolatedCPUs, CPUs,
		l.Host.Port, q(l.Identity), q(l.KnownHosts), q(BootParams), q(l.Host.PowerCycleCommand),
		q(l.Tree.Dir), q(l.Fragment), q(l.CacheDir), IsolatedCPUs, durationText(opt.Duration),
		l.Metric, durationText(l.Threshold), durationText(opt.GoodNoise), durationText(opt.BadNoise))
}

func (l *Lab) machineName() string {
	if l.name == "" {
		return "simlab"
	}
	return l.name
}

// threshold is where bad begins between two levels of the longest single
// noise: their geometric mean.
func threshold(good, bad time.Duration) time.Duration {
	mean := math.Sqrt(float64(good) * float64(bad))
	return time.Duration(math.Round(mean/float64(time.Microsecond))) * time.Microsecond
}

// durationText writes a duration as a job file does: 10s, 20us.
func durationText(d time.Duration) string {
	switch {
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d%time.Millisecond == 0:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	case d%time.Microsecond == 0:
		return strconv.FormatInt(int64(d/time.Microsecond), 10) + "us"
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// Subject is a commit's subject line ("" when it is not the tree's).
func (t *Tree) Subject(commit string) string {
	for i, c := range t.Commits {
		if c == commit && i < len(t.Subjects) {
			return t.Subjects[i]
		}
	}
	return ""
}
