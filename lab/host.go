package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"kbisect/configs"
	"kbisect/remote"
)

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

// DialHost connects to the job's lab host.
func DialHost(ctx context.Context, job *configs.Job) (*remote.Host, error) {
	opt, err := HostOptions(job)
	if err != nil {
		return nil, err
	}
	return remote.Dial(ctx, opt)
}

// WaitForHost waits, up to the job's boot timeout, until its host answers
// SSH on whatever kernel.
func WaitForHost(ctx context.Context, job *configs.Job) error {
	opt, err := HostOptions(job)
	if err != nil {
		return err
	}
	dial := func(ctx context.Context) (*remote.Host, error) { return remote.Dial(ctx, opt) }
	h, _, err := remote.WaitForHost(ctx, dial, job.Boot.Timeout.D())
	if err != nil {
		return err
	}
	return h.Close()
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

// BootArtifact installs the artifact on the job's host, boots it as the
// job says, and verifies that it runs with the job's parameters. It
// returns the connection to the new kernel and its facts. A kernel that
// fails is a *remote.KernelError; anything else wrong is the lab's.
func BootArtifact(ctx context.Context, job *configs.Job, art remote.Artifact, consoleLog io.Writer) (*remote.Host, remote.Facts, error) {
	h, err := DialHost(ctx, job)
	if err != nil {
		return nil, remote.Facts{}, err
	}
	var env []string
	for _, c := range []configs.Command{job.Boot.PowerCycle, job.Boot.Console, job.Boot.Script, job.Boot.Initramfs} {
		vars, err := c.Env(nil)
		if err != nil {
			h.Close()
			return nil, remote.Facts{}, fmt.Errorf("%s: %v", job.File, err)
		}
		env = append(env, vars...)
	}
	// A copy to a host that stops reading must not hang the night.
	installCtx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	if err := h.Install(installCtx, art, remote.InstallOptions{Initramfs: string(job.Boot.Initramfs), Keep: job.Boot.KeepKernels, Env: env}); err != nil {
		h.Close()
		return nil, remote.Facts{}, err
	}
	opt, _ := HostOptions(job)
	redial := func(ctx context.Context) (*remote.Host, error) { return remote.Dial(ctx, opt) }
	// The boot, a power cycle and the wait after it, with room to spare:
	// nothing in it may hang the night.
	bootCtx, cancelBoot := context.WithTimeout(ctx, 2*job.Boot.Timeout.D()+10*time.Minute)
	defer cancelBoot()
	return remote.Boot(bootCtx, h, redial, remote.BootOptions{
		Method:       job.Boot.Method,
		Release:      art.Release,
		Params:       job.Boot.Params,
		ExtraCmdline: job.Boot.ExtraCmdline,
		Script:       string(job.Boot.Script),
		Timeout:      job.Boot.Timeout.D(),
		PowerCycle:   string(job.Boot.PowerCycle),
		Console:      string(job.Boot.Console),
		ConsoleLog:   consoleLog,
		Env:          env,
		Expect:       Expect(job, art.Release),
	})
}

// Expect is what the job's test kernels must show once booted (release
// "" for whichever runs).
func Expect(job *configs.Job, release string) remote.Expect {
	return remote.Expect{Release: release, Params: job.Boot.Params, PreemptRT: RequiresPreemptRT(job)}
}
