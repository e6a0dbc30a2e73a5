package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"kbisect/configs"
	"kbisect/kbuild"
	"kbisect/qemu"
	"kbisect/remote"
)

// Room this machine needs: floors that catch a full disk before the first
// build, not estimates (a distribution config's build takes far more).
const (
	buildRoom = 2 << 30  // a build slot's worktree and objects, the artifacts
	stateRoom = 64 << 20 // logs, raw tool outputs, reports
)

// preflightTimeout bounds a preflight: it is meant to take seconds.
const preflightTimeout = 2 * time.Minute

// PreflightOptions say what else a preflight knows of the run.
type PreflightOptions struct {
	// StateDir is the run's state directory, made or not yet ("": none).
	StateDir string
	// Resume says the state directory holds a run that may have stopped
	// in the middle of a boot: a host that does not answer (but resolves
	// and knows us) is waited for, up to boot.timeout, before that is a
	// problem. Otherwise nothing is retried.
	Resume bool
	// Say hears what the preflight waits for (nil: nothing).
	Say func(format string, args ...any)
	// BaseKnown says the run's state recorded the base command line its
	// kernels boot from: the host's own kernel is not asked for it.
	BaseKnown bool
}

// Readiness is what a preflight found: whether a run of the job can start.
type Readiness struct {
	// Job is the job file.
	Job string
	// Host is the lab host, user@address:port ("" for boot.method qemu).
	Host string
	// Facts are the running kernel's, when the host answered.
	Facts *remote.Facts
	// Problems are every reason the run would fail, each with its fix.
	Problems []remote.Problem
	// Base is the base command line the run's kernels would boot from, as
	// first contact finds it (nil: boot.base_cmdline, the state's record,
	// or not found).
	Base *remote.Base
	// Checked says what the preflight could check, for a "ready" line.
	Checked string
}

// What a preflight checks: a lab host, or the local QEMU guest, which
// is reached only when a run boots its first kernel.
const (
	checkedHost = "SSH, sudo, boot method, workload, CPUs, room here and there"
	checkedQEMU = "qemu-system-x86_64, the guest's image and keys, its vCPUs against the job's CPU lists, the tree, room here; the guest answers when a run boots its first kernel"
)

// Err is a *PreflightError when something is wrong, else nil.
func (r *Readiness) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	return &PreflightError{Job: r.Job, Host: r.Host, Problems: r.Problems}
}

// PreflightError is a lab that is not ready for a run: found before
// anything was built, never a verdict.
type PreflightError struct {
	Job, Host string
	Problems  []remote.Problem
}

func (e *PreflightError) Error() string {
	var b strings.Builder
	where := e.Job
	if e.Host != "" {
		where = e.Host + " (" + e.Job + ")"
	}
	fmt.Fprintf(&b, "preflight: the lab of %s is not ready; nothing was built:", where)
	for _, p := range e.Problems {
		fmt.Fprintf(&b, "\n  - %s\n    fix: %s", p.What, p.Fix)
	}
	fmt.Fprintf(&b, "\n(kbisect host check --job %s reproduces this)", e.Job)
	return b.String()
}

// Preflight checks in seconds, before anything is built, that a run of
// the job can go through: here, the tree, room for the build, the cache
// and the state, and the power-cycle and console commands; on the host,
// SSH with a verified key and working login and sudo, the boot method's
// prerequisites, room in /boot, the workload's programs and tracefs, and
// the CPUs the job names. kbisect host check shows the same. An error is
// only the context's.
func Preflight(ctx context.Context, job *configs.Job, o PreflightOptions) (*Readiness, error) {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout+o.waitForHost(job))
	defer cancel()
	r := &Readiness{Job: job.File, Checked: checkedHost}
	add := func(what, fix string) { r.Problems = append(r.Problems, remote.Problem{What: what, Fix: fix}) }
	tree := string(job.Build.Tree)
	if out, err := exec.CommandContext(ctx, "git", "-C", tree, "rev-parse", "--git-dir").CombinedOutput(); err != nil {
		add(fmt.Sprintf("build.tree %s is not a git repository: %s", tree, strings.TrimSpace(string(out))), "point build.tree at a kernel tree (git clone)")
	}
	if p := roomProblem("build.cache_dir", string(job.Build.CacheDir), buildRoom); p != nil {
		r.Problems = append(r.Problems, *p)
	}
	if o.StateDir != "" {
		if p := roomProblem("the state directory", o.StateDir, stateRoom); p != nil {
			r.Problems = append(r.Problems, *p)
		}
	}
	if job.Build.Host.Address != "" {
		// The kernels are built there: its tools, not this machine's.
		r.Problems = append(r.Problems, buildServerProblems(ctx, job)...)
	} else if err := kbuild.CheckCompilerWrapper(job.Build.Wrapper()); err != nil {
		add(err.Error(), "install it where kbisect runs, or give its full path in build.compiler_wrapper")
	}
	for _, c := range []struct {
		key     string
		command configs.Command
	}{{"boot.power_cycle", job.Boot.PowerCycle}, {"boot.console", job.Boot.Console}} {
		if prog := remote.MissingLocalProgram(ctx, string(c.command)); prog != "" {
			add(fmt.Sprintf("%s runs %s, which this machine does not have", c.key, prog), "install it where kbisect runs, or give its full path in "+c.key)
		}
	}
	if job.Boot.Method == configs.BootQEMU {
		// The guest is started by each run: here is its lab.
		r.Host, r.Checked = "the local QEMU guest (boot.method qemu)", checkedQEMU
		r.Problems = append(r.Problems, guestCPUProblems(job)...)
		if err := qemuImage(job).Check(); err != nil {
			add(err.Error(), "kbisect lab image --dir "+qemuImage(job).Dir+" (or set boot.qemu.image to where it is)")
		}
		if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
			add("qemu-system-x86_64 is not installed here", "apt-get install qemu-system-x86")
		}
		return r, ctx.Err()
	}
	opt, err := HostOptions(job)
	if err != nil {
		return nil, err
	}
	r.Host = opt.User + "@" + opt.Address
	h, err := o.dial(ctx, job, opt)
	if err != nil {
		r.Problems = append(r.Problems, remote.DialProblem(err, opt))
		return r, parentErr(ctx)
	}
	defer h.Close()
	r.Host = h.Name()
	facts, err := h.Facts(ctx)
	if err != nil {
		r.Problems = append(r.Problems, remote.DialProblem(err, opt))
		return r, parentErr(ctx)
	}
	r.Facts = &facts
	problems, err := h.Preflight(ctx, hostNeeds(job))
	if err != nil {
		r.Problems = append(r.Problems, remote.DialProblem(err, opt))
		return r, parentErr(ctx)
	}
	r.Problems = append(r.Problems, problems...)
	if t := toLabOf(job); t != nil && job.Build.Host.Address != "" {
		// Not a problem: the kernels go through here when it fails.
		r.Checked += "; " + t.checked(ctx, NewBuildServer(job, ""), h)
	}
	if job.Boot.BaseCmdline == "" && !o.BaseKnown {
		// First contact, now rather than after the first build: a host
		// left on a test kernel with no record of its own kernel's
		// command line has no base to boot from.
		base, err := h.OwnCmdline(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return r, parentErr(ctx)
			}
			var nb *remote.NoBaseError
			if errors.As(err, &nb) {
				add("no base command line for the test kernels: "+nb.Why, remote.NoBaseFix+" in the job")
			} else {
				add(err.Error(), "check that the host's /proc/cmdline can be read and /var/lib/kbisect written (sudo), then kbisect host check")
			}
		} else {
			r.Base = &base
		}
	}
	return r, nil
}

// waitForHost is how long a resumed run waits for a host that may be
// rebooting: boot.timeout, else nothing.
func (o PreflightOptions) waitForHost(job *configs.Job) time.Duration {
	if o.Resume {
		return job.Boot.Timeout.D()
	}
	return 0
}

// dial connects to the host once; a resumed run whose host may be in the
// middle of a reboot waits for it.
func (o PreflightOptions) dial(ctx context.Context, job *configs.Job, opt remote.Options) (*remote.Host, error) {
	h, err := remote.Dial(ctx, opt)
	if err == nil || !o.Resume || !remote.MayBeRebooting(err) {
		return h, err
	}
	if o.Say != nil {
		o.Say("preflight: %s does not answer (%v); the run before may have stopped during a reboot: waiting up to %s", opt.Address, err, job.Boot.Timeout)
	}
	h, _, err = remote.WaitForHost(ctx, remote.DialerOf(opt), job.Boot.Timeout.D())
	return h, err
}

// parentErr is the context's error when the caller's context ended (an
// interrupt), not the preflight's own deadline.
func parentErr(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), context.Canceled) {
		return ctx.Err()
	}
	return nil
}

// roomProblem says what keeps dir (made or not yet) from taking need
// bytes: it cannot be written, or its file system is too full.
func roomProblem(what, dir string, need uint64) *remote.Problem {
	if dir == "" {
		return nil
	}
	existing := dir
	for {
		if _, err := os.Stat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			return &remote.Problem{What: fmt.Sprintf("%s %s: no part of the path exists", what, dir), Fix: "give a path on a mounted file system"}
		}
		existing = parent
	}
	if err := syscall.Access(existing, 2 /* W_OK */); err != nil {
		return &remote.Problem{What: fmt.Sprintf("%s %s cannot be written (%s: %v)", what, dir, existing, err), Fix: "give a directory this user can write, or fix its permissions"}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(existing, &st); err != nil {
		return nil // no word on its room: the build will say
	}
	if free := st.Bavail * uint64(st.Bsize); free < need {
		return &remote.Problem{What: fmt.Sprintf("%s %s has %d MB free, less than the %d MB a run needs there", what, dir, free>>20, need>>20),
			Fix: "free space on its file system, or move it (build.cache_dir, --state)"}
	}
	return nil
}

// guestCPUProblems says which CPUs the job names that the QEMU guest will
// not have: its vCPUs are boot.qemu.cpus capped at this machine's cores,
// and a boot parameter naming a CPU beyond them would fail the first
// boot's verification after a whole build.
func guestCPUProblems(job *configs.Job) []remote.Problem {
	vcpus, capped := qemu.CPUs(max(job.Boot.QEMU.CPUs, 1))
	guest := make(configs.CPUs, vcpus)
	for i := range guest {
		guest[i] = i
	}
	has := fmt.Sprintf("it has %d vCPUs (%s)", vcpus, guest)
	if capped != "" {
		has += "; " + capped
	}
	missing := map[string][]string{} // key → what it names that the guest lacks
	var keys []string
	for _, l := range hostNeeds(job).Lists {
		if m := configs.CPUs(l.CPUs).Minus(guest); len(m) > 0 {
			if _, ok := missing[l.Key]; !ok {
				keys = append(keys, l.Key)
			}
			missing[l.Key] = append(missing[l.Key], strings.TrimSpace(l.Name+" "+m.String()))
		}
	}
	var bad []remote.Problem
	for _, k := range keys {
		bad = append(bad, remote.Problem{
			What: fmt.Sprintf("%s names CPUs the QEMU guest does not have: %s (%s)", k, strings.Join(missing[k], ", "), has),
			Fix:  fmt.Sprintf("name CPUs of %s in %s, or give the guest more vCPUs (boot.qemu.cpus, at most this machine's cores)", guest, k)})
	}
	return bad
}
