package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"kbisect/configs"
	"kbisect/progress"
	"kbisect/qemu"
	"kbisect/remote"
)

// QEMULab is boot.method qemu: every kernel boots in a fresh local QEMU
// guest (the previous one is stopped), with the job's parameters and the
// lab image; the pipeline reaches it over SSH on a forwarded port, with
// the same code as a real host. Its Boot is the pipeline's Boot.
type QEMULab struct {
	Job *configs.Job
	// Image is the guest image (kbisect lab image).
	Image qemu.Image
	// Dir keeps the consoles (console/<release>.log) and known_hosts.
	Dir string
	// Progress hears what the lab chose and why (acceleration, vCPUs),
	// as lines.
	Progress progress.Sink

	vm      *qemu.VM
	console *consoleSwitch
	accel   string
	cpus    int
	port    int // the running guest's forwarded SSH port
}

// consoleSwitch is the guest's serial console, written to the log of the
// kernel that runs: a kexec moves it to the next kernel's file.
type consoleSwitch struct {
	mu sync.Mutex
	f  *os.File
}

func (c *consoleSwitch) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return len(b), nil
	}
	return c.f.Write(b)
}

// to makes f the console's file, closing the one before.
func (c *consoleSwitch) to(f *os.File) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f != nil {
		c.f.Close()
	}
	c.f = f
}

// NewQEMULab is the job's QEMU lab, its image checked.
func NewQEMULab(job *configs.Job, dir string, sink progress.Sink) (*QEMULab, error) {
	im := qemuImage(job)
	if err := im.Check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "console"), 0o755); err != nil {
		return nil, err
	}
	if sink == nil {
		sink = progress.Discard
	}
	return &QEMULab{Job: job, Image: im, Dir: dir, Progress: sink}, nil
}

// Boot stops the guest that runs, starts one with the artifact's kernel,
// waits for its sshd and checks that the kernel runs with the job's
// parameters. A kernel that panics (QEMU ends: panic=-1, -no-reboot), or
// whose guest does not answer within boot.timeout, is a
// *remote.KernelError with the console's tail; a guest that runs another
// kernel or command line than asked is a *remote.InfraError.
func (q *QEMULab) Boot(ctx context.Context, art remote.Artifact) (Machine, remote.Facts, error) {
	job := q.Job
	if job.Boot.QEMU.Reboot == configs.RebootKexec && q.vm != nil {
		if ended, _ := q.vm.Exited(); !ended {
			m, f, err := q.kexec(ctx, art)
			var ke *remote.KernelError
			if err == nil || errors.As(err, &ke) || ctx.Err() != nil {
				return m, f, err
			}
			progress.Linef(q.Progress, "kexec in the guest failed (%v): a fresh guest boots %s", err, art.Release)
		}
	}
	q.Close()
	if q.accel == "" {
		var why string
		q.accel, why = qemu.Accel(ctx, job.Boot.QEMU.Accel, "", art.Image)
		progress.Linef(q.Progress, "QEMU acceleration: %s", why)
		var note string
		if q.cpus, note = qemu.CPUs(max(job.Boot.QEMU.CPUs, 1)); note != "" {
			progress.Linef(q.Progress, "%s", note)
		}
	}
	port, err := qemu.FreePort()
	if err != nil {
		return nil, remote.Facts{}, err
	}
	known := filepath.Join(q.Dir, "known_hosts")
	if err := q.Image.KnownHosts(known, port); err != nil {
		return nil, remote.Facts{}, err
	}
	console, err := q.consoleFile(art.Release)
	if err != nil {
		return nil, remote.Facts{}, err
	}
	q.console = &consoleSwitch{f: console} // closed with the guest
	vm, err := qemu.Start(qemuOptions(job, art, q.Image, q.cpus, q.accel, port), q.console)
	if err != nil {
		q.Close()
		return nil, remote.Facts{}, err
	}
	q.vm, q.port = vm, port
	opt := q.sshOptions()
	timeout := guestBootTimeout(job)
	deadline := time.Now().Add(timeout)
	kernelFailed := func(reason string) error {
		panicked, last := remote.ConsoleEvidence(vm.Tail(64 << 10))
		return &remote.KernelError{Release: art.Release, Reason: reason, Panic: panicked, Console: last}
	}
	for {
		if ended, werr := vm.Exited(); ended {
			return nil, remote.Facts{}, kernelFailed(fmt.Sprintf("the guest ended before its sshd answered (%v)", werr))
		}
		if err := ctx.Err(); err != nil {
			q.Close()
			return nil, remote.Facts{}, err
		}
		if time.Now().After(deadline) {
			q.Close()
			return nil, remote.Facts{}, kernelFailed(fmt.Sprintf("no sshd within boot.timeout %s", timeout))
		}
		// Every try has a hard deadline: slirp accepts the connection
		// while the guest boots, and the banner never comes.
		dial := remote.DialerOf(opt)
		h, f, err := remote.Attempt(ctx, dial)
		if err != nil {
			select {
			case <-time.After(time.Second):
			case <-vm.Done():
			case <-ctx.Done():
			}
			continue
		}
		expect := Expect(job, art.Release)
		expect.Cmdline = qemuOptions(job, art, q.Image, q.cpus, q.accel, port).Append()
		if err := verifyGuest(f, expect); err != nil {
			h.Close()
			return nil, f, err
		}
		return h, f, nil
	}
}

// verifyGuest checks that the guest runs the kernel and the command line
// asked for. One that does not is the lab's failure, as on a real host
// (docs/remote.md): its kernel is never measured and never a verdict.
func verifyGuest(f remote.Facts, expect remote.Expect) error {
	if problems := f.Check(expect); len(problems) > 0 {
		return &remote.InfraError{Host: "the QEMU guest", Op: "verify", Err: fmt.Errorf("the booted kernel is not the one asked for: %s", strings.Join(problems, "; "))}
	}
	return nil
}

// sshOptions reach the running guest.
func (q *QEMULab) sshOptions() remote.Options {
	return remote.Options{Address: "127.0.0.1", Port: q.port, User: "root", Identity: q.Image.Key(), KnownHosts: filepath.Join(q.Dir, "known_hosts"),
		ConnectTimeout: 5 * time.Second, Keepalive: 5 * time.Second}
}

func (q *QEMULab) consoleFile(release string) (*os.File, error) {
	return os.OpenFile(filepath.Join(q.Dir, "console", release+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// kexec boots the artifact inside the running guest, as on a real host
// (remote's install and kexec boot over the guest's SSH): no new QEMU, no
// firmware, no second start of user space's image. A kernel that panics
// ends QEMU (panic=-1 with -no-reboot) and one that never answers is
// stopped with it: both are the kernel's failures, with the console's
// tail. Anything else is the lab's, and Boot starts a fresh guest.
func (q *QEMULab) kexec(ctx context.Context, art remote.Artifact) (Machine, remote.Facts, error) {
	job, vm := q.Job, q.vm
	opt := q.sshOptions()
	dial := remote.DialerOf(opt)
	h, _, err := remote.Attempt(ctx, dial)
	if err != nil {
		return nil, remote.Facts{}, err
	}
	installCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := h.Install(installCtx, art, remote.InstallOptions{Initramfs: "none", Keep: 2}); err != nil {
		h.Close()
		return nil, remote.Facts{}, err
	}
	console, err := q.consoleFile(art.Release)
	if err != nil {
		h.Close()
		return nil, remote.Facts{}, err
	}
	q.console.to(console)
	// The wait ends when QEMU does: a panic is not a timeout.
	bootCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-vm.Done():
			stop()
		case <-bootCtx.Done():
		}
	}()
	timeout := guestBootTimeout(job)
	nh, f, err := remote.Boot(bootCtx, h, dial, guestKexecOptions(job, art, timeout))
	kernelFailed := func(reason string) error {
		panicked, last := remote.ConsoleEvidence(vm.Tail(64 << 10))
		q.Close()
		return &remote.KernelError{Release: art.Release, Reason: reason, Panic: panicked, Console: last}
	}
	ended, werr := vm.Exited()
	switch {
	case err == nil:
		return nh, f, nil
	case ended && ctx.Err() == nil:
		return nil, f, kernelFailed(fmt.Sprintf("the guest ended after kexec, before the kernel's sshd answered (%v)", werr))
	case remote.NeverCameBack(err):
		return nil, f, kernelFailed(fmt.Sprintf("no sshd within boot.timeout %s after kexec", timeout))
	}
	if nh != nil {
		nh.Close()
	}
	return nil, f, err
}

// Close stops the guest that runs, if any.
func (q *QEMULab) Close() {
	if q.vm != nil {
		_ = q.vm.Stop()
		q.vm = nil
	}
	if q.console != nil {
		q.console.to(nil)
		q.console = nil
	}
}
