package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"kbisect/configs"
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
	// Say hears what the lab chose and why (acceleration, vCPUs).
	Say func(string)

	vm      *qemu.VM
	console *os.File
	accel   string
	cpus    int
}

// NewQEMULab is the job's QEMU lab, its image checked.
func NewQEMULab(job *configs.Job, dir string, say func(string)) (*QEMULab, error) {
	im := qemu.Image{Dir: qemu.DefaultImageDir()}
	if p := string(job.Boot.QEMU.Image); p != "" {
		im.Dir = p
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			im.Dir = filepath.Dir(p)
		}
	}
	if err := im.Check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "console"), 0o755); err != nil {
		return nil, err
	}
	if say == nil {
		say = func(string) {}
	}
	return &QEMULab{Job: job, Image: im, Dir: dir, Say: say}, nil
}

// Boot stops the guest that runs, starts one with the artifact's kernel,
// waits for its sshd and checks that the kernel runs with the job's
// parameters. A kernel that panics (QEMU ends: panic=-1, -no-reboot), or
// whose guest does not answer within boot.timeout, is a
// *remote.KernelError with the console's tail.
func (q *QEMULab) Boot(ctx context.Context, art remote.Artifact) (Machine, remote.Facts, error) {
	q.Close()
	job := q.Job
	if q.accel == "" {
		var why string
		q.accel, why = qemu.Accel(ctx, job.Boot.QEMU.Accel, "", art.Image)
		q.Say("QEMU acceleration: " + why)
		var note string
		if q.cpus, note = qemu.CPUs(max(job.Boot.QEMU.CPUs, 1)); note != "" {
			q.Say(note)
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
	console, err := os.OpenFile(filepath.Join(q.Dir, "console", art.Release+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, remote.Facts{}, err
	}
	q.console = console // closed with the guest
	o := qemu.Options{Kernel: art.Image, Image: q.Image.RootFS(), Memory: int64(job.Boot.QEMU.Memory), CPUs: q.cpus, Accel: q.accel,
		Params: strings.TrimSpace(job.Boot.Params + " " + job.Boot.ExtraCmdline), SSHPort: port, Args: job.Boot.QEMU.Args}
	vm, err := qemu.Start(o, console)
	if err != nil {
		q.Close()
		return nil, remote.Facts{}, err
	}
	q.vm = vm
	opt := remote.Options{Address: "127.0.0.1", Port: port, User: "root", Identity: q.Image.Key(), KnownHosts: known,
		ConnectTimeout: 5 * time.Second, Keepalive: 5 * time.Second}
	timeout := job.Boot.Timeout.D()
	if timeout <= 0 {
		timeout = 3 * time.Minute
	}
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
		dial := func(ctx context.Context) (*remote.Host, error) { return remote.Dial(ctx, opt) }
		h, f, err := remote.Attempt(ctx, dial)
		if err != nil {
			select {
			case <-time.After(time.Second):
			case <-vm.Done():
			case <-ctx.Done():
			}
			continue
		}
		if problems := f.Check(Expect(job, art.Release)); len(problems) > 0 {
			h.Close()
			return nil, f, kernelFailed("runs, but not as the job asks: " + strings.Join(problems, "; "))
		}
		return h, f, nil
	}
}

// Close stops the guest that runs, if any.
func (q *QEMULab) Close() {
	if q.vm != nil {
		_ = q.vm.Stop()
		q.vm = nil
	}
	if q.console != nil {
		q.console.Close()
		q.console = nil
	}
}
