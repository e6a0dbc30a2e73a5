package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"kbisect/configs"
	"kbisect/internal/shell"
)

// Boot methods.
const (
	MethodKexec  = "kexec"
	MethodGrub   = "grub"
	MethodScript = "script"
)

// BootOptions say how a test kernel is booted and the host recovered.
type BootOptions struct {
	Method string
	// Release is the installed kernel to boot (/boot/vmlinuz-Release).
	Release string
	// BaseCmdline is what the command line starts from (Base.Cmdline:
	// the host's own kernel's, recorded once, or boot.base_cmdline);
	// Params are the job's boot parameters, ExtraCmdline the rest.
	BaseCmdline, Params, ExtraCmdline string
	// Script boots the installed kernel on the host (method script),
	// with KBISECT_RELEASE and KBISECT_CMDLINE (the whole command line,
	// which the booted kernel must show) set.
	Script string
	// Timeout bounds the wait for the new kernel to answer SSH.
	Timeout time.Duration
	// PowerCycle runs here, where kbisect runs, when the kernel does not
	// come back: it must bring the host back on its default kernel.
	PowerCycle string
	// Console, when set, runs here during the boot and prints the host's
	// console; ConsoleLog keeps all of it.
	Console    string
	ConsoleLog io.Writer
	// ScriptEnv holds the ${NAME} values boot.script uses: they go to
	// the host with the boot script. LocalEnv holds those of PowerCycle
	// and Console, which run here: they never reach the host.
	ScriptEnv, LocalEnv []string
	// OwnRelease is the host's own kernel, the base command line's
	// (empty: not known). A host that comes back on it after the test
	// kernel started had that kernel die: a panic reboots through the
	// firmware to the default entry, whatever kernel ran before the boot.
	OwnRelease string
	// Expect is what the booted kernel must show; its Cmdline is set by
	// Boot: the whole command line it boots with.
	Expect Expect
}

// KernelError is a kernel that failed: it did not come back (and the host
// was power-cycled back to its default kernel) or it panicked. A
// bisection skips the commit (or calls it bad when it bisects boot
// failures); it is never an infrastructure failure.
type KernelError struct {
	Release string
	Reason  string
	// CameBackOn is the kernel the host came back on, when it came back
	// on the one that ran before (a panic with panic=N reboots).
	CameBackOn string
	// Panic is the console's first panic or oops line, Console its last
	// lines, when a console was captured.
	Panic, Console string
}

func (e *KernelError) Error() string { return fmt.Sprintf("kernel %s: %s", e.Release, e.Reason) }

// Dialer connects to the host again after a reboot.
type Dialer func(ctx context.Context) (*Host, error)

// DialerOf is Dial with its options bound, as a boot redials the host.
func DialerOf(opt Options) Dialer {
	return func(ctx context.Context) (*Host, error) { return Dial(ctx, opt) }
}

// Boot boots the installed kernel on the host, waits for it to answer
// with a new boot id, and verifies it runs as expected. It returns the new
// connection and the new kernel's facts. The old connection is closed.
func Boot(ctx context.Context, h *Host, dial Dialer, opt BootOptions) (*Host, Facts, error) {
	defer h.Close()
	if err := checkRelease(opt.Release); err != nil {
		return nil, Facts{}, err
	}
	if strings.TrimSpace(opt.BaseCmdline) == "" {
		return nil, Facts{}, fmt.Errorf("boot %s: no base command line (the host's own kernel's, or boot.base_cmdline)", opt.Release)
	}
	cmdline := BootCmdline(opt.BaseCmdline, opt.Params, opt.ExtraCmdline)
	before, err := h.Facts(ctx)
	if err != nil {
		return nil, Facts{}, err
	}
	name := h.Name()
	var nh *Host
	var facts Facts
	err = withConsole(ctx, opt, func() error {
		if err := trigger(ctx, h, cmdline, opt); err != nil {
			return err
		}
		h.Close()
		var err error
		nh, facts, err = waitForBoot(ctx, dial, before.BootID, opt.Timeout)
		var timeout *bootTimeout
		switch {
		case errors.As(err, &timeout) && timeout.stillOld:
			// The old kernel kept answering: the reboot never happened,
			// which is the lab's problem, not the test kernel's.
			return &InfraError{Host: name, Op: "boot " + opt.Method, Err: fmt.Errorf("the host never rebooted: boot id %s answered for %s", before.BootID, opt.Timeout)}
		case errors.As(err, &timeout):
			return recoverHost(ctx, name, dial, before.BootID, opt, err)
		case err != nil:
			return err
		case facts.Release != opt.Release && (facts.Release == before.Release || (opt.OwnRelease != "" && facts.Release == opt.OwnRelease)):
			// Back on the kernel that ran before, or on the host's own,
			// with a new boot id: the test kernel died and the machine
			// rebooted (panic=N).
			nh.Close()
			return &KernelError{Release: opt.Release, CameBackOn: facts.Release,
				Reason: fmt.Sprintf("the host came back on %s instead: the kernel did not boot (a panic with panic=N reboots)", facts.Release)}
		}
		return nil
	})
	if err != nil {
		return nil, Facts{}, err
	}
	expect := opt.Expect
	expect.Cmdline = cmdline
	if bad := facts.Check(expect); len(bad) > 0 {
		return nh, facts, &InfraError{Host: nh.Name(), Op: "verify", Err: fmt.Errorf("the booted kernel is not the one asked for: %s", strings.Join(bad, "; "))}
	}
	return nh, facts, nil
}

// trigger starts the reboot into the test kernel. The command returns
// before the connection drops: the reboot itself is left to a background
// process on the host.
func trigger(ctx context.Context, h *Host, cmdline string, opt BootOptions) error {
	var script string
	rel := shell.Quote(opt.Release)
	switch opt.Method {
	case MethodKexec:
		script = kexecScript(opt.Release, cmdline)
	case MethodGrub:
		// A one-shot entry in custom.cfg (read by grub at boot, no
		// update-grub needed): a hang and a power cycle land on the
		// default kernel again.
		script = fmt.Sprintf(`# kbisect:grub %s
set -e
KBISECT_CMDLINE=%s
GRUB_ARGS=%s
d=/boot/grub; [ -d /boot/grub2 ] && d=/boot/grub2
if [ -e "$d/custom.cfg" ] && ! grep -q '^# written by kbisect' "$d/custom.cfg"; then
	echo "kbisect: $d/custom.cfg is not kbisect's: move it away (or source it from elsewhere) to boot with grub" >&2; exit 3
fi
uuid=$(grub-probe --target=fs_uuid /boot 2>/dev/null || grub2-probe --target=fs_uuid /boot)
relpath() { grub-mkrelpath "$1" 2>/dev/null || grub2-mkrelpath "$1"; }
kernel=$(relpath /boot/vmlinuz-%s)
initrd=
for f in /boot/initrd.img-%s /boot/initramfs-%s.img; do [ -e "$f" ] && initrd="initrd $(relpath "$f")" && break; done
{
	echo "# written by kbisect: the one-shot entry of the test kernel"
	echo "menuentry 'kbisect %s' --id kbisect {"
	echo "	search --no-floppy --fs-uuid --set=root $uuid"
	echo "	linux $kernel $GRUB_ARGS"
	echo "	$initrd"
	echo "}"
} > "$d/custom.cfg"
grub-reboot kbisect 2>/dev/null || grub2-reboot kbisect
(sleep 1; systemctl reboot 2>/dev/null || reboot) </dev/null >/dev/null 2>&1 &
`, rel, shell.Quote(cmdline), shell.Quote(grubWords(cmdline)), rel, rel, rel, opt.Release)
	case MethodScript:
		script = "# kbisect:script\n(\n" + opt.Script + "\n) </dev/null >/dev/null 2>&1 &\n"
	default:
		return fmt.Errorf("boot method %q is not supported here yet", opt.Method)
	}
	env := []string{"KBISECT_RELEASE=" + opt.Release}
	if opt.Method == MethodScript {
		// The script boots with the command line kbisect then verifies.
		env = append(env, "KBISECT_CMDLINE="+cmdline)
		env = append(env, opt.ScriptEnv...)
	}
	if _, _, err := h.Run(ctx, shell.Cmd{Script: script, Env: env}); err != nil {
		var ee *shell.ExitError
		if errors.As(err, &ee) && opt.Method == MethodKexec && ee.Code == exitKexecRejected {
			// kexec_load refused the image itself: the kernel cannot
			// even start. Any other failure of the load (no memory, busy,
			// not permitted, no kexec) is the lab's.
			return &KernelError{Release: opt.Release, Reason: "kexec refused the image: " + strings.TrimSpace(ee.Stderr)}
		}
		if errors.As(err, &ee) && opt.Method == MethodKexec && ee.Code == exitKexecLab {
			return &InfraError{Host: h.Name(), Op: "boot kexec", Err: fmt.Errorf("kexec could not load %s, not for the kernel's fault: %s", opt.Release, strings.TrimSpace(ee.Stderr))}
		}
		if errors.As(err, &ee) {
			return &InfraError{Host: h.Name(), Op: "boot " + opt.Method, Err: err}
		}
		return err
	}
	return nil
}

// The kexec script's exit codes when kexec -l fails: the host types the
// failure where it happens, from the errno kexec-tools reports.
const (
	// exitKexecRejected: the image itself was refused (EINVAL, ENOEXEC,
	// a file type no loader knows): the kernel's failure.
	exitKexecRejected = 80
	// exitKexecLab: any other failure of the load (ENOMEM, EBUSY, EPERM,
	// a missing image): the lab's.
	exitKexecLab = 81
)

// kexecScript loads the release's kernel with kexec and starts the
// reboot into it in the background. A failed load exits with
// exitKexecRejected or exitKexecLab (126 and 127 when kexec cannot run),
// kexec's words on standard error.
func kexecScript(release, cmdline string) string {
	rel := shell.Quote(release)
	return fmt.Sprintf(`# kbisect:kexec %s
set -e
KBISECT_CMDLINE=%s
initrd=
for f in /boot/initrd.img-%s /boot/initramfs-%s.img; do [ -e "$f" ] && initrd="--initrd=$f" && break; done
rc=0
out=$(LC_ALL=C kexec -l /boot/vmlinuz-%s $initrd --command-line="$KBISECT_CMDLINE" 2>&1) || rc=$?
if [ "$rc" -ne 0 ]; then
	printf '%%s\n' "$out" >&2
	case "$rc" in 126|127) exit "$rc" ;; esac
	case "$out" in
	*"Invalid argument"*|*"Exec format error"*|*"Cannot determine the file type"*) exit %d ;;
	esac
	exit %d
fi
(sleep 1; systemctl kexec 2>/dev/null || kexec -e) </dev/null >/dev/null 2>&1 &
`, rel, shell.Quote(cmdline), rel, rel, rel, exitKexecRejected, exitKexecLab)
}

// bootTimeout is a kernel that did not answer within the boot timeout;
// stillOld says the old kernel was the last to answer.
type bootTimeout struct {
	after    time.Duration
	stillOld bool
	last     error // the last attempt's error, for the message
}

// NeverCameBack reports whether err is a test kernel that never answered
// within the boot timeout after the old one went away: the kernel's
// failure, whatever the lab then could or could not do about it.
func NeverCameBack(err error) bool {
	var t *bootTimeout
	return errors.As(err, &t) && !t.stillOld
}

func (e *bootTimeout) Error() string {
	msg := fmt.Sprintf("did not answer SSH within %s", e.after)
	if e.last != nil {
		msg += fmt.Sprintf(" (last try: %v)", e.last)
	}
	return msg
}

// waitForBoot polls the host with backoff until it answers with another
// boot id than before, within timeout.
func waitForBoot(ctx context.Context, dial Dialer, before string, timeout time.Duration) (*Host, Facts, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wait := 500 * time.Millisecond
	stillOld := false
	var last error
	for {
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return nil, Facts{}, &bootTimeout{after: timeout, stillOld: stillOld, last: last}
			}
			return nil, Facts{}, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 15*time.Second)
		h, f, err := attempt(ctx, dial)
		var hk *HostKeyError
		switch {
		case errors.As(err, &hk):
			return nil, Facts{}, err // never retried: a changed key is not a slow boot
		case err != nil:
			last, stillOld = err, false
		case f.BootID == before:
			h.Close() // the old kernel still answering
			last, stillOld = nil, true
		default:
			return h, f, nil
		}
	}
}

// WaitForHost polls the host until it answers SSH, on whatever kernel,
// within timeout: after a step that was stopped in the middle of a boot,
// the host may still be rebooting.
func WaitForHost(ctx context.Context, dial Dialer, timeout time.Duration) (*Host, Facts, error) {
	if h, f, err := attempt(ctx, dial); err == nil {
		return h, f, nil
	}
	return waitForBoot(ctx, dial, "", timeout)
}

// Attempt connects once and reads the facts, within a deadline of its
// own (a guest whose boot another loop watches).
func Attempt(ctx context.Context, dial Dialer) (*Host, Facts, error) { return attempt(ctx, dial) }

// attempt connects once and reads the facts, within a deadline of its
// own: a connection to a dying kernel must not eat the boot timeout.
func attempt(ctx context.Context, dial Dialer) (*Host, Facts, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	h, err := dial(ctx)
	if err != nil {
		return nil, Facts{}, err
	}
	f, err := h.Facts(ctx)
	if err != nil {
		h.Close()
		return nil, Facts{}, err
	}
	return h, f, nil
}

// PowerCycle runs command (boot.power_cycle) here, with env, and waits up
// to timeout for the host to answer again, on whatever kernel: for a host
// that stopped answering (hung mid-measurement), not for a kernel that
// failed to boot (recoverHost).
func PowerCycle(ctx context.Context, dial Dialer, command string, env []string, timeout time.Duration) (Facts, error) {
	if err := runLocal(ctx, command, env); err != nil {
		return Facts{}, err
	}
	h, f, err := waitForBoot(ctx, dial, "", timeout)
	if err != nil {
		return Facts{}, fmt.Errorf("after the power cycle the host %w", err)
	}
	h.Close()
	return f, nil
}

// recoverHost power-cycles a host whose test kernel did not come back and
// waits for it on its default kernel: the kernel failed, the lab did not.
func recoverHost(ctx context.Context, name string, dial Dialer, before string, opt BootOptions, why error) error {
	if opt.PowerCycle == "" {
		return &InfraError{Host: name, Op: "boot", Err: fmt.Errorf("kernel %s %w, and there is no boot.power_cycle to get the host back", opt.Release, why)}
	}
	if err := runLocal(ctx, opt.PowerCycle, opt.LocalEnv); err != nil {
		return &InfraError{Host: name, Op: "power cycle", Err: err}
	}
	h, f, err := waitForBoot(ctx, dial, before, opt.Timeout)
	if err != nil {
		return &InfraError{Host: name, Op: "power cycle", Err: fmt.Errorf("after the power cycle the host %w", err)}
	}
	h.Close()
	return &KernelError{Release: opt.Release, Reason: fmt.Sprintf("%v; the host was power-cycled and is back on %s", why, f.Release)}
}

// runLocal runs a command here (the power cycle) with the job's secrets in
// its environment, within five minutes.
func runLocal(ctx context.Context, command string, env []string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	_, _, err := shell.LocalRunner{}.Run(ctx, shell.Cmd{Script: command, Env: env})
	if err != nil {
		return fmt.Errorf("%s: %w", command, err)
	}
	return nil
}

var releaseName = regexp.MustCompile(`^[A-Za-z0-9._+~-]+$`)

// checkRelease refuses a kernel release that could be anything but a
// file name in /boot.
func checkRelease(r string) error {
	if !releaseName.MatchString(r) {
		return fmt.Errorf("%q is not a kernel release (letters, digits and . _ + ~ -)", r)
	}
	return nil
}

// grubWords quotes each word of a command line for grub's script syntax,
// which expands $, ; and quotes as a shell would.
func grubWords(cmdline string) string {
	var out []string
	for _, p := range configs.SplitCmdline(cmdline) {
		out = append(out, "'"+strings.ReplaceAll(p.Raw, "'", `'\''`)+"'")
	}
	return strings.Join(out, " ")
}
