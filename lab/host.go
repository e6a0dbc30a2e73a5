package lab

import (
	"context"
	"io"
	"time"

	"kbisect/configs"
	"kbisect/remote"
)

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
	dial := remote.DialerOf(opt)
	h, _, err := remote.WaitForHost(ctx, dial, job.Boot.Timeout.D())
	if err != nil {
		return err
	}
	return h.Close()
}

// BootArtifact installs the artifact on the job's host, boots it as the
// job says with the job's parameters added to base (the base command
// line found at first contact: RecordedBase, HostBase), and verifies
// that it runs with exactly that command line. It returns the connection
// to the new kernel and its facts. A kernel that fails is a
// *remote.KernelError; anything else wrong is the lab's.
func BootArtifact(ctx context.Context, job *configs.Job, art remote.Artifact, base string, consoleLog io.Writer) (*remote.Host, remote.Facts, error) {
	return bootArtifact(ctx, job, art, remote.Base{Cmdline: base}, consoleLog, nil, nil, nil)
}

// bootArtifact is BootArtifact from a base that may name the host's own
// kernel: coming back on it is then the test kernel's failure. The build
// server, when there is one, may send the kernel to the host itself, as
// to says; say hears how it went.
func bootArtifact(ctx context.Context, job *configs.Job, art remote.Artifact, base remote.Base, consoleLog io.Writer, server *BuildServer, to *ToLab, say func(string)) (*remote.Host, remote.Facts, error) {
	h, err := DialHost(ctx, job)
	if err != nil {
		return nil, remote.Facts{}, err
	}
	inst, err := installOptions(job)
	if err != nil {
		h.Close()
		return nil, remote.Facts{}, err
	}
	bo, err := bootOptions(job, art, base.Cmdline, consoleLog)
	if err != nil {
		h.Close()
		return nil, remote.Facts{}, err
	}
	bo.OwnRelease = base.Release
	// A copy to a host that stops reading must not hang the night.
	installCtx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	if err := to.install(installCtx, server, h, art, inst, say); err != nil {
		h.Close()
		return nil, remote.Facts{}, err
	}
	opt, _ := HostOptions(job)
	redial := remote.DialerOf(opt)
	// The boot, a power cycle and the wait after it, with room to spare:
	// nothing in it may hang the night.
	bootCtx, cancelBoot := context.WithTimeout(ctx, 2*job.Boot.Timeout.D()+10*time.Minute)
	defer cancelBoot()
	return remote.Boot(bootCtx, h, redial, bo)
}
