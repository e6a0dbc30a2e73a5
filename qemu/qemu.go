// Package qemu runs a lab machine in a local QEMU guest: the kernel under
// test booted directly (-kernel) with the job's parameters, a root file
// system image with sshd, SSH forwarded to a port on 127.0.0.1, the serial
// console kept. kbisect talks to the guest with the same SSH code as to a
// real host; a "reboot" is QEMU stopped and started with the next kernel.
// It also builds that image (debootstrap, once) and picks the guest's
// acceleration and vCPUs for the host it runs on.
//
// It imports no kbisect package (the internal packages are all it may
// import): it knows neither the job file nor SSH, which lab brings to it.
package qemu

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"kbisect/internal/shell"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options say how to run the guest.
type Options struct {
	// Binary is the QEMU to run (default qemu-system-x86_64).
	Binary string
	// Kernel is the kernel image; Initrd an optional initramfs.
	Kernel, Initrd string
	// Image is the root file system (raw, ext4), on /dev/vda. It is used
	// with -snapshot: every boot starts from the same image.
	Image string
	// Memory in bytes, CPUs the vCPUs.
	Memory int64
	CPUs   int
	// Accel is "kvm" or "tcg".
	Accel string
	// Params are the job's boot parameters; kbisect adds the console,
	// the root and panic=-1 (with -no-reboot, a panic ends QEMU).
	Params string
	// SSHPort is the host port forwarded to the guest's port 22.
	SSHPort int
	// Args are more QEMU arguments, as the job gives them.
	Args []string
}

// BaseCmdline is what every guest's command line starts from: the
// console, the root, kbisect's init, and panic=-1.
func BaseCmdline() string {
	return "console=ttyS0 root=/dev/vda rw rootfstype=ext4 init=/sbin/kbisect-init panic=-1"
}

// Append is the kernel command line the guest boots with.
func (o Options) Append() string {
	if p := strings.TrimSpace(o.Params); p != "" {
		return BaseCmdline() + " " + p
	}
	return BaseCmdline()
}

// Cmdline is the QEMU command line.
func (o Options) Cmdline() []string {
	bin := o.Binary
	if bin == "" {
		bin = "qemu-system-x86_64"
	}
	argv := []string{bin, "-nographic", "-nodefaults", "-no-reboot", "-serial", "stdio", "-monitor", "none"}
	switch o.Accel {
	case "kvm":
		argv = append(argv, "-accel", "kvm", "-cpu", "host")
	default:
		argv = append(argv, "-accel", "tcg,thread=multi", "-cpu", "max")
	}
	argv = append(argv, "-smp", strconv.Itoa(max(o.CPUs, 1)), "-m", strconv.FormatInt(max(o.Memory>>20, 256), 10)+"M",
		"-kernel", o.Kernel)
	if o.Initrd != "" {
		argv = append(argv, "-initrd", o.Initrd)
	}
	argv = append(argv, "-append", o.Append(),
		"-drive", "file="+o.Image+",format=raw,if=virtio,snapshot=on",
		"-netdev", fmt.Sprintf("user,id=n0,hostfwd=tcp:127.0.0.1:%d-:22", o.SSHPort),
		"-device", "virtio-net-pci,netdev=n0")
	return append(argv, o.Args...)
}

// VM is a running guest.
type VM struct {
	Options Options
	cmd     *exec.Cmd
	done    chan struct{}
	err     error // how QEMU ended, once done is closed

	mu      sync.Mutex
	console bytes.Buffer // the last consoleKeep bytes
	log     io.Writer
}

const consoleKeep = 64 << 10

// Start starts QEMU; the console goes to log (nil: kept only for Tail).
func Start(o Options, log io.Writer) (*VM, error) {
	for _, f := range []string{o.Kernel, o.Image} {
		if _, err := os.Stat(f); err != nil {
			return nil, err
		}
	}
	argv := o.Cmdline()
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, fmt.Errorf("%s: not found (Debian: apt-get install qemu-system-x86)", argv[0])
	}
	v := &VM{Options: o, done: make(chan struct{}), log: log}
	v.cmd = exec.Command(argv[0], argv[1:]...)
	v.cmd.Stdin = nil
	v.cmd.Stdout, v.cmd.Stderr = v, v
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	v.cmd.WaitDelay = 2 * time.Second
	if err := v.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		v.err = v.cmd.Wait()
		close(v.done)
	}()
	return v, nil
}

// Write keeps the console's tail and passes it on to the log.
func (v *VM) Write(p []byte) (int, error) {
	v.mu.Lock()
	v.console.Write(p)
	if v.console.Len() > 2*consoleKeep {
		tail := append([]byte(nil), v.console.Bytes()[v.console.Len()-consoleKeep:]...)
		v.console.Reset()
		v.console.Write(tail)
	}
	log := v.log
	v.mu.Unlock()
	if log != nil {
		_, _ = log.Write(p)
	}
	return len(p), nil
}

// Tail is the end of the console, up to n bytes.
func (v *VM) Tail(n int) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	b := v.console.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.ReplaceAll(string(b), "\r", "")
}

// Exited says whether QEMU has ended, and how.
func (v *VM) Exited() (bool, error) {
	select {
	case <-v.done:
		return true, v.err
	default:
		return false, nil
	}
}

// Done is closed when QEMU ends.
func (v *VM) Done() <-chan struct{} { return v.done }

// Stop ends QEMU (SIGTERM, then SIGKILL) and waits for it.
func (v *VM) Stop() error {
	if ok, _ := v.Exited(); ok {
		return nil
	}
	shell.StopGroup(v.cmd.Process.Pid, v.done, 5*time.Second)
	return nil
}

// FreePort is a TCP port on 127.0.0.1 that nothing listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Accel picks the acceleration: "kvm" or "tcg" as asked, or for "auto"
// KVM only when /dev/kvm exists and a short probe boot of kernel reaches
// its console, since a /dev/kvm can be there and still not run a Linux
// guest (a PVM host: QEMU aborts, or the kernel crawls). It says why.
func Accel(ctx context.Context, want, binary, kernel string) (string, string) {
	switch want {
	case "kvm", "tcg":
		return want, "as the job asks (boot.qemu.accel: " + want + ")"
	}
	if _, err := os.Stat("/dev/kvm"); err != nil {
		return "tcg", "no /dev/kvm: TCG"
	}
	if kernel == "" {
		return "tcg", "/dev/kvm exists, but there is no kernel to probe it with yet: TCG"
	}
	if binary == "" {
		binary = "qemu-system-x86_64"
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, "-nographic", "-nodefaults", "-no-reboot", "-serial", "stdio", "-monitor", "none",
		"-accel", "kvm", "-cpu", "host", "-smp", "1", "-m", "256M", "-kernel", kernel, "-append", "console=ttyS0 panic=-1")
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run()
	if strings.Contains(out.String(), "Linux version") {
		return "kvm", "/dev/kvm boots a kernel (a probe reached its console): KVM"
	}
	why := strings.TrimSpace(lastLine(out.String()))
	if why == "" {
		why = "nothing on the console in 20s"
	}
	return "tcg", fmt.Sprintf("/dev/kvm exists but does not boot a kernel (%s): TCG", why)
}

// CPUs caps the vCPUs at the host's cores: more vCPUs than cores turns
// the host's scheduling into the guest's noise.
func CPUs(want int) (int, string) {
	n := runtime.NumCPU()
	if want > n {
		return n, fmt.Sprintf("boot.qemu.cpus %d is more than the host's %d cores: %d vCPUs", want, n, n)
	}
	return max(want, 1), ""
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
