package lab

// Every place the job file reaches a lower package is here: the job's
// sections become kbuild's options, remote's SSH, install and boot
// options, qemu's guest, and noise's workload and rule, so that a change
// of the job file or of a lower package's options is made in this file.
// The few scalars handed straight to a lower package's function are read
// where they are used, and all listed here: boot.timeout (remote's
// WaitForHost and the boot's deadline, host.go), boot.qemu.accel and
// boot.qemu.cpus (qemu.Accel, qemu.CPUs, qemu.go), build.tree
// (worktree.Derive, confirm.go), and verdict.metric, aggregate and
// confidence (noise.CompareAB through CompareRounds, ab.go).

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"kbisect/configs"
	"kbisect/internal/atomicfile"
	"kbisect/kbuild"
	"kbisect/noise"
	"kbisect/qemu"
	"kbisect/remote"
)

// kbuild: what is built, and from which base config.

// BuildOptions turns a job's build section into kbuild's options.
func BuildOptions(job *configs.Job, log io.Writer) kbuild.Options {
	b := job.Build
	o := kbuild.Options{Tree: string(b.Tree), Base: b.Config, Inline: b.Options, MakeVars: b.MakeVars,
		Jobs: b.Jobs, CCache: b.CCache, CacheDir: string(b.CacheDir), CacheSize: int64(b.CacheSize),
		Timeout: b.Timeout.D(), Log: log, CompilerWrapper: b.Wrapper()}
	for _, f := range b.Fragments {
		o.Fragments = append(o.Fragments, string(f))
	}
	if b.CCacheRemote != "" {
		// A run checked the environment before it started (CheckEnv);
		// the URL is a secret, its error names only the variables.
		remote, err := b.CCacheRemote.Expand(nil)
		if err != nil && log != nil {
			fmt.Fprintf(log, "kbisect: build.ccache_remote: %v: ccache runs without its remote storage\n", err)
		}
		o.CCacheRemote = remote
	}
	if b.CacheURL != "" {
		// Its password is a secret, for kbuild's requests alone.
		u, err := b.CacheURL.HTTPURL(nil)
		if err != nil && log != nil {
			fmt.Fprintf(log, "kbisect: build.cache_url: %v: kernels are built without the HTTP cache\n", err)
		}
		o.CacheURL = u
	}
	if b.Host.Address != "" {
		// This executable is what the server runs, unless the job names
		// one installed there; a failure here is said when it is needed.
		exe, _ := os.Executable()
		o.Server = NewBuildServer(job, exe)
	}
	return o
}

// BaseConfig is the base config a job's kernels build from: build.config
// itself, or, for "host", the config of the kernel the lab host runs,
// fetched once over SSH and kept in the cache directory
// (host-configs/<machine>.config) so that every kernel of a bisection
// starts from the same base, whatever kernel the host boots later.
func BaseConfig(ctx context.Context, job *configs.Job, say io.Writer) (string, error) {
	if job.Build.Config != configs.ConfigHost {
		return job.Build.Config, nil
	}
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == '\\' {
			return '_'
		}
		return r
	}, job.Machine.Name)
	if name == "" || name == "." || name == ".." {
		name = "host-" + job.Host.Address
	}
	path := filepath.Join(string(job.Build.CacheDir), "host-configs", name+".config")
	if _, err := os.Stat(path); err == nil {
		fmt.Fprintf(say, "base config: %s (fetched from the host before; remove it to fetch again)\n", path)
		return path, nil
	}
	h, err := DialHost(ctx, job)
	if err != nil {
		return "", fmt.Errorf("build.config host: %w", err)
	}
	defer h.Close()
	cfg, release, err := h.RunningConfig(ctx)
	if err != nil {
		return "", fmt.Errorf("build.config host: %w", err)
	}
	if strings.Contains(release, "-kbisect-") {
		return "", fmt.Errorf("build.config host: %s runs %s, a kernel kbisect built: its config is kbisect's, not the machine's; boot the machine's own kernel once, or give build.config a file", h.Name(), release)
	}
	header := fmt.Sprintf("# kbisect: the config of %s on %s, fetched %s\n", release, h.Name(), time.Now().UTC().Format(time.RFC3339))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := atomicfile.WriteFile(path, append([]byte(header), cfg...)); err != nil {
		return "", err
	}
	fmt.Fprintf(say, "base config: %s (%s's running %s)\n", path, h.Name(), release)
	return path, nil
}

// remote: how the host is reached, and how a kernel is installed, booted
// and recognised.

// HostOptions turns a job's host section into SSH options.
func HostOptions(job *configs.Job) (remote.Options, error) {
	if job.Boot.Method == configs.BootQEMU {
		return remote.Options{}, fmt.Errorf("%s: boot.method qemu has no lab host: its guest runs only during a run", job.File)
	}
	h := job.Host
	return remote.Options{
		Address:          h.Address,
		Port:             h.Port,
		User:             h.User,
		Identity:         string(h.Identity),
		KnownHosts:       string(h.KnownHosts),
		AcceptNewHostKey: h.AcceptNewHostKey,
		Jump:             h.Jump,
		Sudo:             h.Sudo,
		ConnectTimeout:   h.ConnectTimeout.D(),
		Keepalive:        h.Keepalive.D(),
	}, nil
}

// commandEnv is the environment of one of the job's commands: the ${NAME}
// variables its text uses, and no other command's. A command that runs
// here must not hand its secrets (a BMC password) to the lab host.
func commandEnv(job *configs.Job, c configs.Command) ([]string, error) {
	vars, err := c.Env(nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", job.File, err)
	}
	return vars, nil
}

// installOptions say how the job's kernels are installed on its host.
func installOptions(job *configs.Job) (remote.InstallOptions, error) {
	env, err := commandEnv(job, job.Boot.Initramfs)
	return remote.InstallOptions{Initramfs: string(job.Boot.Initramfs), Keep: job.Boot.KeepKernels, Env: env}, err
}

// bootOptions say how the job's host boots the artifact, from which base
// command line, and what it must show once booted.
func bootOptions(job *configs.Job, art remote.Artifact, base string, consoleLog io.Writer) (remote.BootOptions, error) {
	o := remote.BootOptions{
		Method:       job.Boot.Method,
		Release:      art.Release,
		BaseCmdline:  base,
		Params:       job.Boot.Params,
		ExtraCmdline: job.Boot.ExtraCmdline,
		Script:       string(job.Boot.Script),
		Timeout:      job.Boot.Timeout.D(),
		PowerCycle:   string(job.Boot.PowerCycle),
		Console:      string(job.Boot.Console),
		ConsoleLog:   consoleLog,
		Expect:       Expect(job, art.Release),
	}
	var err error
	if o.ScriptEnv, err = commandEnv(job, job.Boot.Script); err != nil {
		return o, err
	}
	for _, c := range []configs.Command{job.Boot.PowerCycle, job.Boot.Console} {
		vars, err := commandEnv(job, c)
		if err != nil {
			return o, err
		}
		o.LocalEnv = append(o.LocalEnv, vars...)
	}
	return o, nil
}

// hostNeeds is what a run of the job asks of its host, for the
// preflight: the boot method's and the workload's programs, tracefs, the
// machine's CPUs and every CPU list the job names.
func hostNeeds(job *configs.Job) remote.Needs {
	n := remote.Needs{Method: job.Boot.Method, Initramfs: string(job.Boot.Initramfs), CPUs: job.Machine.CPUs}
	if w, err := Workload(job, func(string) (string, bool) { return "", true }); err == nil {
		n.Tools, n.Tracefs = w.Programs()
	}
	w := job.Workload
	n.Lists = append(n.Lists, remote.CPUList{Key: "workload.cpus", CPUs: w.CPUs, Online: true},
		remote.CPUList{Key: "workload.load_cpus", CPUs: w.LoadCPUs, Online: true})
	if bp, err := configs.ParseBootParams(job.Boot.Params, 0); err == nil {
		for _, l := range []struct {
			name string
			cpus configs.CPUs
		}{{"isolcpus", bp.IsolCPUs}, {"nohz_full", bp.NohzFull}, {"rcu_nocbs", bp.RCUNocbs}, {"irqaffinity", bp.IRQAffinity}, {"kthread_cpus", bp.KthreadCPUs}} {
			n.Lists = append(n.Lists, remote.CPUList{Key: "boot.params", Name: l.name, CPUs: l.cpus})
		}
	}
	return n
}

// Expect is what the job's test kernels must show once booted (release
// "" for whichever runs).
func Expect(job *configs.Job, release string) remote.Expect {
	return remote.Expect{Release: release, Params: job.Boot.Params, PreemptRT: RequiresPreemptRT(job)}
}

// RequiresPreemptRT reports whether the job's kernels must run PREEMPT_RT:
// its fragments or options ask for CONFIG_PREEMPT_RT=y.
func RequiresPreemptRT(job *configs.Job) bool {
	want := false
	check := func(line string) {
		if o, err := configs.ParseConfigLine(line); err == nil && o.Name == "CONFIG_PREEMPT_RT" {
			want = o.Value == "y" // the last word counts, as in merge_config.sh
		}
	}
	for _, f := range job.Build.Fragments {
		data, err := os.ReadFile(string(f))
		if err != nil {
			continue // configs reported it
		}
		for _, line := range strings.Split(string(data), "\n") {
			check(line)
		}
	}
	for _, o := range job.Build.Options {
		check(o)
	}
	return want
}

// qemu: the guest of boot.method qemu.

// qemuImage is the job's lab image: boot.qemu.image, a directory or a file
// in it, else kbisect lab image's.
func qemuImage(job *configs.Job) qemu.Image {
	im := qemu.Image{Dir: qemu.DefaultImageDir()}
	if p := string(job.Boot.QEMU.Image); p != "" {
		im.Dir = p
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			im.Dir = filepath.Dir(p)
		}
	}
	return im
}

// qemuOptions start a guest that boots the artifact with the job's
// parameters, its SSH forwarded to port.
func qemuOptions(job *configs.Job, art remote.Artifact, im qemu.Image, cpus int, accel string, port int) qemu.Options {
	return qemu.Options{Kernel: art.Image, Image: im.RootFS(), Memory: int64(job.Boot.QEMU.Memory), CPUs: cpus, Accel: accel,
		Params: strings.TrimSpace(job.Boot.Params + " " + job.Boot.ExtraCmdline), SSHPort: port, Args: job.Boot.QEMU.Args}
}

// guestBootTimeout is how long a guest's kernel gets to answer SSH:
// boot.timeout, 3 minutes when unset.
func guestBootTimeout(job *configs.Job) time.Duration {
	if t := job.Boot.Timeout.D(); t > 0 {
		return t
	}
	return 3 * time.Minute
}

// guestKexecOptions kexec the artifact inside the running guest with the
// job's parameters.
func guestKexecOptions(job *configs.Job, art remote.Artifact, timeout time.Duration) remote.BootOptions {
	return remote.BootOptions{Method: remote.MethodKexec, Release: art.Release, BaseCmdline: qemu.BaseCmdline(),
		Params: job.Boot.Params, ExtraCmdline: job.Boot.ExtraCmdline, Timeout: timeout, Expect: Expect(job, art.Release)}
}

// noise: the workload, the metric, and the rule that decides.

// Workload turns a job's workload section into what noise runs. env looks
// up the ${NAME} variables of its commands (os.LookupEnv when nil); their
// values go to the commands' environment only.
func Workload(job *configs.Job, env func(string) (string, bool)) (noise.Workload, error) {
	w := job.Workload
	out := noise.Workload{
		Tool:           w.Tool,
		CPUs:           w.CPUs,
		Duration:       w.Duration.D(),
		Period:         w.Period.D(),
		Runtime:        w.Runtime.D(),
		NoiseThreshold: w.NoiseThreshold.D(),
		Priority:       w.Priority,
		Args:           w.Args,
		Command:        string(w.Command),
		Load:           string(w.Load),
		LoadCPUs:       w.LoadCPUs,
	}
	// The tools' own threads go to the housekeeping CPUs: neither
	// measured nor isolated by the boot parameters.
	if job.Machine.CPUs > 0 {
		out.Housekeeping = allCPUs(job.Machine.CPUs).Minus(w.CPUs)
		if bp, err := configs.ParseBootParams(job.Boot.Params, job.Machine.CPUs); err == nil {
			out.Housekeeping = configs.CPUs(out.Housekeeping).Minus(bp.Isolated()).Minus(bp.Tickless())
		}
	}
	if w.Tool == configs.ToolCommand {
		unit := map[string]time.Duration{"ns": time.Nanosecond, "us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[w.Unit]
		out.CommandMetric = noise.CommandMetric{JSONPath: w.JSONPath, Unit: unit}
		if w.Pattern != "" {
			re, err := regexp.Compile(w.Pattern)
			if err != nil {
				return out, fmt.Errorf("workload.pattern: %v", err) // validated by configs already
			}
			out.CommandMetric.Pattern = re
		}
	}
	for _, c := range []configs.Command{w.Command, w.Load} {
		vars, err := c.Env(env)
		if err != nil {
			return out, fmt.Errorf("%s: %v", job.File, err)
		}
		out.Env = append(out.Env, vars...)
	}
	return out, nil
}

func allCPUs(n int) configs.CPUs {
	out := make(configs.CPUs, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// MetricKind is the kind of the job's metric: a time for a command whose
// numbers have a unit.
func MetricKind(job *configs.Job) (string, error) {
	if job.Workload.Tool == configs.ToolCommand && job.Workload.Unit != "" {
		return noise.KindTime, nil // the command's numbers are in ns
	}
	info, err := noise.Metric(job.Workload.Tool, job.Verdict.Metric)
	return info.Kind, err
}

// Rule turns a job's verdict section into a noise rule. good and bad are
// the endpoints' sample values from calibration (nil before it): a ratio
// needs good, auto needs both.
func Rule(job *configs.Job, good, bad []float64) (noise.Rule, error) {
	v := job.Verdict
	kind, err := MetricKind(job)
	if err != nil {
		return noise.Rule{}, err
	}
	r := noise.Rule{
		MetricKind:  kind,
		HigherIsBad: v.Direction != configs.LowerIsBad,
		MinSamples:  v.Samples.Min,
		MaxSamples:  v.Samples.Max,
		Confidence:  v.Confidence,
		Good:        good,
		Bad:         bad,
	}
	switch t := v.Threshold; t.Kind {
	case configs.ThresholdAuto:
		r.Kind = noise.Auto
	case configs.ThresholdRatio:
		r.Kind, r.Threshold = noise.Ratio, t.Value
	case configs.ThresholdTime:
		r.Kind, r.Threshold = noise.Absolute, float64(t.Time)
	default:
		r.Kind, r.Threshold = noise.Absolute, t.Value
	}
	return r, nil
}

// SampleValue is one sample's value for the verdict: the job's metric,
// aggregated over CPUs as the job says (max: the worst CPU).
func SampleValue(job *configs.Job, m *noise.Measurement) (float64, error) {
	info, err := noise.Metric(m.Tool, job.Verdict.Metric)
	if err != nil {
		return 0, err
	}
	vals, err := m.MetricValues(info.Name)
	if err != nil {
		return 0, err
	}
	return noise.AggregateWorst(vals, job.Verdict.Aggregate, job.Verdict.Direction != configs.LowerIsBad)
}

// SampleCount is how many samples a commit judged against another gets:
// what calibration takes of each endpoint, verdict.samples.max.
func SampleCount(job *configs.Job) int {
	return max(job.Verdict.Samples.Max, job.Verdict.Samples.Min, 3)
}

// Relative reports whether the job's threshold is set from a good
// kernel's samples (ratio or auto) rather than given.
func Relative(job *configs.Job) bool {
	k := job.Verdict.Threshold.Kind
	return k == configs.ThresholdAuto || k == configs.ThresholdRatio
}
