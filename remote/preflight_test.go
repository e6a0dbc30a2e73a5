package remote

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
)

// readyHost is what a ready 8-CPU host's preflight prints.
const readyHost = `uid=0
present=0-7
online=0-7
have=grub-reboot
have=grub-probe
have=grub-mkrelpath
have=kexec
have=rtla
boot_writable=yes
boot_free_kb=400000
modules_writable=yes
modules_free_kb=9000000
grub_default=saved
grub_cfg=/boot/grub/grub.cfg
grub_next_entry=yes
kexec_load_disabled=0
lockdown=[none] integrity confidentiality
tracefs=/sys/kernel/tracing
`

func problemsOf(ps []Problem) string {
	var lines []string
	for _, p := range ps {
		lines = append(lines, p.What+" | "+p.Fix)
	}
	return strings.Join(lines, "\n")
}

func TestAReadyHostHasNoProblems(t *testing.T) {
	for _, method := range []string{MethodKexec, MethodGrub, MethodScript} {
		n := Needs{Method: method, Initramfs: "none", Tools: []string{"rtla"}, Tracefs: true, CPUs: 8,
			Lists: []CPUList{{Key: "workload.cpus", CPUs: []int{1, 2, 3}, Online: true}}}
		if ps := parseReadiness(readyHost).check(n, Options{User: "root"}); len(ps) > 0 {
			t.Errorf("%s: %s", method, problemsOf(ps))
		}
	}
}

// TestEveryProblemOfAHostIsNamedWithItsFix: what a host that is not ready
// prints gives one problem per cause, each with the fix a person needs.
func TestEveryProblemOfAHostIsNamedWithItsFix(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(string) string
		needs  Needs
		opt    Options
		wanted []string
	}{
		{"grub without saved default", func(s string) string { return strings.Replace(s, "grub_default=saved", "grub_default=0", 1) },
			Needs{Method: MethodGrub}, Options{},
			[]string{"GRUB_DEFAULT is 0 on the host: grub-reboot's one-shot entry needs GRUB_DEFAULT=saved | set GRUB_DEFAULT=saved in the host's /etc/default/grub and run update-grub"}},
		{"grub.cfg not regenerated", func(s string) string { return strings.Replace(s, "grub_next_entry=yes\n", "", 1) },
			Needs{Method: MethodGrub}, Options{},
			[]string{"the host's grub.cfg does not read next_entry: GRUB_DEFAULT=saved is set but update-grub has not run since | run update-grub on the host"}},
		{"no grub.cfg where custom.cfg goes", func(s string) string {
			return strings.Replace(strings.Replace(s, "grub_cfg=/boot/grub/grub.cfg\n", "", 1), "grub_next_entry=yes\n", "", 1)
		}, Needs{Method: MethodGrub}, Options{},
			[]string{"the host has no grub.cfg in /boot/grub or /boot/grub2, where grub reads the custom.cfg that holds kbisect's one-shot entry | use boot.method kexec or script on this host"}},
		{"no grub-reboot", func(s string) string { return strings.Replace(s, "have=grub-reboot\n", "", 1) },
			Needs{Method: MethodGrub}, Options{},
			[]string{"grub-reboot is not installed on the host (boot.method grub) | install grub on the host (Debian: apt-get install grub2-common), or use boot.method kexec"}},
		{"kexec refused", func(s string) string {
			return strings.Replace(strings.Replace(s, "kexec_load_disabled=0", "kexec_load_disabled=1", 1), "[none] integrity", "none [integrity]", 1)
		}, Needs{Method: MethodKexec}, Options{},
			[]string{"the host's kernel refuses kexec: /proc/sys/kernel/kexec_load_disabled is 1 | boot the host with kernel.kexec_load_disabled unset (it stays set until a reboot), or use boot.method grub",
				"the host's kernel is locked down (none [integrity] confidentiality): kexec cannot load an unsigned kernel | disable Secure Boot's lockdown on the host (lockdown=none), or use boot.method grub"}},
		{"not root", func(s string) string { return strings.Replace(s, "uid=0", "uid=1000", 1) },
			Needs{Method: MethodScript}, Options{User: "lab"},
			[]string{"lab is not root on the host (uid 1000): installing, booting and tracing need root | set host.sudo: true (with passwordless sudo for lab) or host.user: root"}},
		{"a full /boot and an initramfs", func(s string) string { return strings.Replace(s, "boot_free_kb=400000", "boot_free_kb=60000", 1) },
			Needs{Method: MethodScript, Initramfs: "dracut"}, Options{},
			[]string{"dracut is not installed on the host (boot.initramfs) | install it on the host, or set boot.initramfs to what the host uses",
				"/boot on the host has 58 MB free, less than the 128 MB a test kernel needs | remove old kernels from the host's /boot, or lower boot.keep_kernels"}},
		{"tools and tracefs", func(s string) string { return strings.Replace(s, "tracefs=/sys/kernel/tracing\n", "", 1) },
			Needs{Method: MethodScript, Tools: []string{"cyclictest", "taskset"}, Tracefs: true}, Options{},
			[]string{"cyclictest is not installed on the host (the workload runs it) | install rt-tests on the host (Debian: apt-get install rt-tests)",
				"taskset is not installed on the host (the workload runs it) | install util-linux on the host (Debian: apt-get install util-linux)",
				"the host has no tracefs (neither /sys/kernel/tracing nor /sys/kernel/debug/tracing): the workload drives a tracer through it | boot the host on a kernel with CONFIG_FTRACE (the test kernels need CONFIG_OSNOISE_TRACER too), or mount tracefs on /sys/kernel/tracing"}},
		{"an offline CPU", func(s string) string { return strings.Replace(s, "online=0-7", "online=0-3,5-7", 1) },
			Needs{Method: MethodScript, Lists: []CPUList{{Key: "workload.cpus", CPUs: []int{3, 4}, Online: true}, {Key: "boot.params", Name: "nohz_full", CPUs: []int{4}}}}, Options{},
			[]string{"workload.cpus names CPU 4, which is offline on the host | bring it online (echo 1 > /sys/devices/system/cpu/cpuN/online), or drop what keeps it offline (nosmt, maxcpus=) from the host's command line"}},
	} {
		got := problemsOf(parseReadiness(tc.edit(readyHost)).check(tc.needs, tc.opt))
		if want := strings.Join(tc.wanted, "\n"); got != want {
			t.Errorf("%s:\ngot\n%s\nwant\n%s", tc.name, got, want)
		}
	}
}

func TestAnUnreachableHostIsNamedWithItsFix(t *testing.T) {
	opt := Options{Address: "system-0.lab.example.com", User: "root", ConnectTimeout: 30e9}
	dns := &InfraError{Host: opt.target(), Op: "dial", Err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: opt.Address, IsNotFound: true}}}
	refused := &InfraError{Host: opt.target(), Op: "dial", Err: &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("connect: %w", syscall.ECONNREFUSED)}}
	for _, tc := range []struct {
		err       error
		want      string
		rebooting bool
	}{
		{dns, "host.address system-0.lab.example.com does not resolve (no such host) | correct host.address, or add the name to DNS or this machine's /etc/hosts", false},
		{refused, "nothing listens for SSH at system-0.lab.example.com:22 (connection refused) | start sshd on the host, or correct host.port", true},
		{&InfraError{Host: opt.target(), Op: "handshake", Err: errors.New("no SSH handshake within 30s")},
			"system-0.lab.example.com:22 did not answer within 30s (host.connect_timeout) | is the host up? is a firewall in the way? set host.jump if it is reached through a bastion", true},
		{&HostKeyError{Host: opt.target(), Changed: true}, "", false},
	} {
		p := DialProblem(tc.err, opt)
		if got := p.What + " | " + p.Fix; tc.want != "" && got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
		if MayBeRebooting(tc.err) != tc.rebooting {
			t.Errorf("%v: may be rebooting %v, want %v", tc.err, !tc.rebooting, tc.rebooting)
		}
	}
}
