package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"kbisect/configs"
	"kbisect/internal/shell"
)

// Problem is one thing that would stop a run, found before it starts,
// with what fixes it.
type Problem struct {
	What string `json:"what"`
	Fix  string `json:"fix"`
}

func (p Problem) String() string { return p.What + "; fix: " + p.Fix }

// Needs is what a run will ask of its host: the boot method's programs,
// the workload's, tracefs, the CPUs the job names, room to install.
type Needs struct {
	// Method is kexec, grub or script.
	Method string
	// Initramfs is the job's boot.initramfs: update-initramfs, dracut and
	// kernel-install must be installed; a command of the job's own is
	// its business.
	Initramfs string
	// Tools are the programs the workload runs (rtla, taskset, …).
	Tools []string
	// Tracefs says the workload drives a tracer through tracefs.
	Tracefs bool
	// CPUs is machine.cpus (0: not said): the host must have that many.
	CPUs int
	// Lists are the CPU lists the job names, each by its key
	// ("workload.cpus"): every CPU must exist; Online ones must be up.
	Lists []CPUList
}

// CPUList is a list of CPUs a job names under Key (and Name, for one of
// several lists under one key: "boot.params", "nohz_full").
type CPUList struct {
	Key, Name string
	CPUs      []int
	Online    bool // the CPUs must be online (measured ones)
}

// Room the host needs for one more test kernel: a floor that catches a
// full disk, not an estimate of a kernel's size.
const (
	bootRoomKB       = 32 << 10  // an image
	bootRoomInitrdKB = 128 << 10 // an image and its initramfs
	modulesRoomKB    = 512 << 10 // a modules tree (Debian's, stripped: ~400 MB)
)

var toolName = regexp.MustCompile(`^[A-Za-z0-9._+-]+$`)

// preflightScript prints what a run needs to know of the host, as
// key=value lines; tools are looked up on the PATH the boot and the
// workload will have (the same user, the same sudo).
func preflightScript(tools []string) string {
	return `# kbisect:preflight ` + strings.Join(tools, " ") + `
echo "uid=$(id -u)"
echo "present=$(cat /sys/devices/system/cpu/present 2>/dev/null)"
echo "online=$(cat /sys/devices/system/cpu/online 2>/dev/null)"
for t in ` + strings.Join(tools, " ") + `; do
	if command -v "$t" >/dev/null 2>&1; then echo "have=$t"; fi
done
room() { df -Pk "$1" 2>/dev/null | awk 'NR == 2 { print $4 }'; }
[ -w /boot ] && echo "boot_writable=yes"
echo "boot_free_kb=$(room /boot)"
m=/lib/modules; [ -d "$m" ] || m=/lib
[ -w "$m" ] && echo "modules_writable=yes"
echo "modules_free_kb=$(room "$m")"
if [ -r /etc/default/grub ]; then
	echo "grub_default=$(sed -n 's/^[[:space:]]*GRUB_DEFAULT=//p' /etc/default/grub | tail -n 1 | tr -d "\"'")"
fi
for d in /boot/grub /boot/grub2; do
	[ -e "$d/grub.cfg" ] || continue
	echo "grub_cfg=$d/grub.cfg"
	grep -q next_entry "$d/grub.cfg" && echo "grub_next_entry=yes"
	if [ -e "$d/custom.cfg" ] && ! grep -q '^# written by kbisect' "$d/custom.cfg"; then echo "grub_custom=$d/custom.cfg"; fi
	break
done
echo "kexec_load_disabled=$(cat /proc/sys/kernel/kexec_load_disabled 2>/dev/null)"
echo "lockdown=$(cat /sys/kernel/security/lockdown 2>/dev/null)"
for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
	if [ -e "$d/available_tracers" ]; then echo "tracefs=$d"; break; fi
done
[ -d /sys/kernel/tracing ] && echo "tracefs_mountpoint=yes"
exit 0
`
}

// readiness is what the preflight script printed.
type readiness map[string][]string

func (r readiness) get(key string) string {
	if v := r[key]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

func (r readiness) kb(key string) (int64, bool) {
	n, err := strconv.ParseInt(r.get(key), 10, 64)
	return n, err == nil
}

func parseReadiness(out string) readiness {
	r := readiness{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			r[k] = append(r[k], strings.TrimSpace(v))
		}
	}
	return r
}

// Preflight checks, in one command, that the host can install, boot and
// measure what n says, and returns every problem with its fix. An error
// is a failure to ask (the connection, sudo), not a problem found.
func (h *Host) Preflight(ctx context.Context, n Needs) ([]Problem, error) {
	tools := n.programs()
	for _, t := range tools {
		if !toolName.MatchString(t) {
			return nil, fmt.Errorf("preflight: %q is not a program name", t)
		}
	}
	out, _, err := h.Run(ctx, shell.Cmd{Script: preflightScript(tools)})
	if err != nil {
		return nil, err
	}
	return parseReadiness(string(out)).check(n, h.opt), nil
}

// programs are the programs n needs on the host's PATH.
func (n Needs) programs() []string {
	var out []string
	switch n.Method {
	case MethodKexec:
		out = append(out, "kexec")
	case MethodGrub:
		out = append(out, "grub-reboot", "grub2-reboot", "grub-probe", "grub2-probe", "grub-mkrelpath", "grub2-mkrelpath")
	}
	switch n.Initramfs {
	case "update-initramfs", "dracut", "kernel-install":
		out = append(out, n.Initramfs)
	}
	for _, t := range n.Tools {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// check compares what the host said with what the run needs.
func (r readiness) check(n Needs, opt Options) []Problem {
	var bad []Problem
	add := func(fix, format string, args ...any) {
		bad = append(bad, Problem{What: fmt.Sprintf(format, args...), Fix: fix})
	}
	have := func(t string) bool { return slices.Contains(r["have"], t) }
	root := r.get("uid") == "0"
	if !root {
		how := "set host.sudo: true (with passwordless sudo for " + opt.User + ") or host.user: root"
		if opt.Sudo {
			how = "sudo runs as uid " + r.get("uid") + ": check the host's sudoers for " + opt.User
		}
		add(how, "%s is not root on the host (uid %s): installing, booting and tracing need root", opt.User, r.get("uid"))
	}
	switch n.Method {
	case MethodKexec:
		if !have("kexec") {
			add("install kexec-tools on the host (Debian: apt-get install kexec-tools), or use boot.method grub", "kexec is not installed on the host (boot.method kexec)")
		}
		if r.get("kexec_load_disabled") == "1" {
			add("boot the host with kernel.kexec_load_disabled unset (it stays set until a reboot), or use boot.method grub", "the host's kernel refuses kexec: /proc/sys/kernel/kexec_load_disabled is 1")
		}
		if l := r.get("lockdown"); l != "" && !strings.Contains(l, "[none]") {
			add("disable Secure Boot's lockdown on the host (lockdown=none), or use boot.method grub", "the host's kernel is locked down (%s): kexec cannot load an unsigned kernel", l)
		}
	case MethodGrub:
		if !have("grub-reboot") && !have("grub2-reboot") {
			add("install grub on the host (Debian: apt-get install grub2-common), or use boot.method kexec", "grub-reboot is not installed on the host (boot.method grub)")
		}
		if !(have("grub-probe") || have("grub2-probe")) || !(have("grub-mkrelpath") || have("grub2-mkrelpath")) {
			add("install grub's tools on the host (Debian: apt-get install grub-common)", "grub-probe or grub-mkrelpath is not installed on the host (boot.method grub)")
		}
		if r.get("grub_cfg") == "" {
			add("use boot.method kexec or script on this host", "the host has no grub.cfg in /boot/grub or /boot/grub2, where grub reads the custom.cfg that holds kbisect's one-shot entry")
		}
		if d := r.get("grub_default"); d != "saved" {
			if d == "" {
				d = "not set"
			}
			add("set GRUB_DEFAULT=saved in the host's /etc/default/grub and run update-grub", "GRUB_DEFAULT is %s on the host: grub-reboot's one-shot entry needs GRUB_DEFAULT=saved", d)
		} else if r.get("grub_cfg") != "" && r.get("grub_next_entry") != "yes" {
			add("run update-grub on the host", "the host's grub.cfg does not read next_entry: GRUB_DEFAULT=saved is set but update-grub has not run since")
		}
		if c := r.get("grub_custom"); c != "" {
			add("move "+c+" away (or source it from elsewhere)", "%s on the host is not kbisect's: the one-shot entry goes there", c)
		}
	}
	if p := n.Initramfs; (p == "update-initramfs" || p == "dracut" || p == "kernel-install") && !have(p) {
		add("install it on the host, or set boot.initramfs to what the host uses", "%s is not installed on the host (boot.initramfs)", p)
	}
	if root {
		need := int64(bootRoomKB)
		if n.Initramfs != "" && n.Initramfs != "none" {
			need = bootRoomInitrdKB
		}
		switch free, ok := r.kb("boot_free_kb"); {
		case r.get("boot_writable") != "yes":
			add("remount /boot read-write on the host", "/boot is not writable on the host")
		case ok && free < need:
			add("remove old kernels from the host's /boot, or lower boot.keep_kernels", "/boot on the host has %d MB free, less than the %d MB a test kernel needs", free>>10, need>>10)
		}
		switch free, ok := r.kb("modules_free_kb"); {
		case r.get("modules_writable") != "yes":
			add("make /lib/modules writable on the host", "/lib/modules is not writable on the host")
		case ok && free < modulesRoomKB:
			add("free space on the host's root file system", "/lib/modules on the host has %d MB free, less than the %d MB a kernel's modules may need", free>>10, modulesRoomKB>>10)
		}
	}
	for _, t := range n.Tools {
		if !have(t) {
			add(installHint(t), "%s is not installed on the host (the workload runs it)", t)
		}
	}
	if n.Tracefs && r.get("tracefs") == "" && r.get("tracefs_mountpoint") != "yes" {
		add("boot the host on a kernel with CONFIG_FTRACE (the test kernels need CONFIG_OSNOISE_TRACER too), or mount tracefs on /sys/kernel/tracing",
			"the host has no tracefs (neither /sys/kernel/tracing nor /sys/kernel/debug/tracing): the workload drives a tracer through it")
	}
	return append(bad, r.checkCPUs(n)...)
}

// checkCPUs says which CPUs the job names that the host lacks.
func (r readiness) checkCPUs(n Needs) []Problem {
	present, err := configs.ParseCPUs(r.get("present"), 0)
	if err != nil || len(present) == 0 {
		return []Problem{{What: fmt.Sprintf("the host does not say which CPUs it has (/sys/devices/system/cpu/present: %q)", r.get("present")),
			Fix: "is /sys mounted on the host?"}}
	}
	online, err := configs.ParseCPUs(r.get("online"), 0)
	if err != nil {
		online = present
	}
	var bad []Problem
	if n.CPUs > 0 && n.CPUs != len(present) {
		bad = append(bad, Problem{What: fmt.Sprintf("the host has %d CPUs (%s), not the %d machine.cpus says", len(present), present, n.CPUs),
			Fix: fmt.Sprintf("set machine.cpus: %d and check the job's CPU lists, or check that host.address is the machine the job describes", len(present))})
	}
	missing := map[string][]string{} // key → what it names that the host lacks
	var keys []string
	for _, l := range n.Lists {
		if m := configs.CPUs(l.CPUs).Minus(present); len(m) > 0 {
			if _, ok := missing[l.Key]; !ok {
				keys = append(keys, l.Key)
			}
			missing[l.Key] = append(missing[l.Key], strings.TrimSpace(l.Name+" "+m.String()))
		} else if off := configs.CPUs(l.CPUs).Minus(online); l.Online && len(off) > 0 {
			bad = append(bad, Problem{What: fmt.Sprintf("%s names CPU %s, which is offline on the host", l.Key, off),
				Fix: "bring it online (echo 1 > /sys/devices/system/cpu/cpuN/online), or drop what keeps it offline (nosmt, maxcpus=) from the host's command line"})
		}
	}
	for _, k := range keys {
		bad = append(bad, Problem{What: fmt.Sprintf("%s names CPU %s, which the host does not have (it has %s)", k, strings.Join(missing[k], ", "), present),
			Fix: "name CPUs the host has in " + k})
	}
	return bad
}

func installHint(tool string) string {
	switch tool {
	case "rtla":
		return "install rtla on the host (Debian: apt-get install rtla; or build tools/tracing/rtla)"
	case "oslat", "cyclictest":
		return "install rt-tests on the host (Debian: apt-get install rt-tests)"
	case "taskset", "setsid":
		return "install util-linux on the host (Debian: apt-get install util-linux)"
	}
	return "install " + tool + " on the host"
}

// DialProblem says why the host could not be reached and what fixes it.
func DialProblem(err error, opt Options) Problem {
	target := opt.target()
	var hk *HostKeyError
	var de *net.DNSError
	var ie *InfraError
	var ne net.Error
	switch {
	case errors.As(err, &hk):
		return Problem{What: err.Error(), Fix: "verify the host key, then put the right line in " + orDefault(opt.KnownHosts, "~/.ssh/known_hosts")}
	case errors.As(err, &de) && de.IsNotFound:
		return Problem{What: fmt.Sprintf("host.address %s does not resolve (no such host)", opt.Address),
			Fix: "correct host.address, or add the name to DNS or this machine's /etc/hosts"}
	case errors.As(err, &de):
		return Problem{What: fmt.Sprintf("%s: cannot resolve %s: %v", target, de.Name, de.Err), Fix: "check this machine's DNS (/etc/resolv.conf)"}
	case errors.Is(err, syscall.ECONNREFUSED):
		return Problem{What: fmt.Sprintf("nothing listens for SSH at %s (connection refused)", target),
			Fix: "start sshd on the host, or correct host.port"}
	case errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH):
		return Problem{What: fmt.Sprintf("%s is unreachable from here (%v)", target, err),
			Fix: "is the host powered on and on the network? set host.jump if it is reached through a bastion"}
	case errors.As(err, &ie) && ie.Op == "auth":
		return Problem{What: err.Error(), Fix: "set host.identity to a private key the host accepts, or load one into ssh-agent"}
	case errors.As(err, &ie) && strings.Contains(ie.Err.Error(), "unable to authenticate"):
		return Problem{What: err.Error(), Fix: fmt.Sprintf("add the public key to %s's ~/.ssh/authorized_keys on the host", opt.User)}
	case errors.As(err, &ie) && strings.Contains(ie.Err.Error(), "passwordless sudo"):
		return Problem{What: err.Error(), Fix: fmt.Sprintf("give %s passwordless sudo on the host (NOPASSWD in sudoers), or log in as root", opt.User)}
	case errors.As(err, &ne) && ne.Timeout(), errors.As(err, &ie) && strings.Contains(ie.Err.Error(), "no SSH handshake within"):
		return Problem{What: fmt.Sprintf("%s did not answer within %s (host.connect_timeout)", target, opt.ConnectTimeout),
			Fix: "is the host up? is a firewall in the way? set host.jump if it is reached through a bastion"}
	}
	return Problem{What: err.Error(), Fix: fmt.Sprintf("check that ssh -p %d %s@%s works from this machine", opt.port(), opt.User, opt.Address)}
}

// MayBeRebooting says whether a failed dial could be a host in the middle
// of a reboot (refused, unreachable, silent, dropped) rather than a host
// that cannot be reached at all (no such name, a wrong key or user).
func MayBeRebooting(err error) bool {
	var hk *HostKeyError
	var de *net.DNSError
	var ie *InfraError
	switch {
	case errors.As(err, &hk), errors.As(err, &de):
		return false
	case errors.As(err, &ie) && (ie.Op == "auth" || ie.Op == "known_hosts" || strings.Contains(ie.Err.Error(), "unable to authenticate")):
		return false
	}
	return true
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// MissingLocalProgram returns the program a command run here (the power
// cycle, the console) starts when this machine's shell cannot find it,
// else "" (also when the command does not start with a plain word).
func MissingLocalProgram(ctx context.Context, command string) string {
	words := strings.Fields(command)
	for len(words) > 0 && assignment.MatchString(words[0]) {
		words = words[1:]
	}
	if len(words) == 0 || strings.ContainsAny(words[0], "$`'\"\\(){};|&<>*?[") {
		return ""
	}
	_, _, err := shell.LocalRunner{}.Run(ctx, shell.Cmd{Script: `command -v -- "$KBISECT_PROGRAM" >/dev/null`, Env: []string{"KBISECT_PROGRAM=" + words[0]}})
	var ee *shell.ExitError
	if errors.As(err, &ee) {
		return words[0]
	}
	return ""
}
