package lab

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"kbisect/configs"
	"kbisect/internal/simhost"
)

// TestAResumedRunWaitsForAHostThatIsRebooting: a host that drops the
// connection before the handshake is a problem at once for a run that
// starts, and is waited for when the run resumes (the run before may have
// stopped in the middle of a reboot).
func TestAResumedRunWaitsForAHostThatIsRebooting(t *testing.T) {
	job, sim := hostJob(t, simhost.Kernel{Release: "6.12.57", Cmdline: "quiet"})
	sim.SetCPUs(4)
	tree := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", tree).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	job.Build.Tree = configs.Path(tree)
	job.Boot.PowerCycle = configs.Command(sim.PowerCycleCommand)

	sim.RefuseConnections(2)
	rd, err := Preflight(context.Background(), job, PreflightOptions{})
	if err != nil || len(rd.Problems) != 1 || rd.Facts != nil || !strings.Contains(rd.Problems[0].What, "handshake") {
		t.Fatalf("a run that starts: %v %+v", err, rd)
	}

	sim.RefuseConnections(2)
	var said []string
	say := func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) }
	rd, err = Preflight(context.Background(), job, PreflightOptions{Resume: true, Say: say})
	if err != nil || rd.Err() != nil || rd.Facts == nil || rd.Facts.Release != "6.12.57" {
		t.Fatalf("a run that resumes: %v %+v", err, rd)
	}
	if len(said) != 1 || !strings.Contains(said[0], "the run before may have stopped during a reboot: waiting up to") {
		t.Errorf("said %q", said)
	}
}

// TestSudoWithoutNOPASSWDIsNamedWithItsFix: host.sudo on a host whose sudo
// asks for a password is found by the preflight, with what to change.
func TestSudoWithoutNOPASSWDIsNamedWithItsFix(t *testing.T) {
	job, sim := hostJob(t, simhost.Kernel{Release: "6.12.57", Cmdline: "quiet"})
	sim.SetCPUs(4)
	job.Host.Sudo = true
	sim.SudoNeedsPassword()
	rd, err := Preflight(context.Background(), job, PreflightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, p := range rd.Problems {
		found = found || (strings.Contains(p.What, "host.sudo needs passwordless sudo for root") &&
			p.Fix == "give root passwordless sudo on the host (NOPASSWD in sudoers), or log in as root")
	}
	if !found {
		t.Errorf("%+v", rd.Problems)
	}
}

// TestAHostLeftOnATestKernelWithoutItsRecordFailsThePreflight: first
// contact happens in the preflight, so a host with no base for the test
// kernels' command line stops the run before the first build; one on its
// own kernel gives its command line as the base.
func TestAHostLeftOnATestKernelWithoutItsRecordFailsThePreflight(t *testing.T) {
	tree := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", tree).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	job, sim := hostJob(t, simhost.Kernel{Release: "6.12.78-kbisect-0123456789ab", Cmdline: "root=/dev/sda1 mitigations=off"})
	sim.SetCPUs(4)
	job.Build.Tree = configs.Path(tree)
	rd, err := Preflight(context.Background(), job, PreflightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, p := range rd.Problems {
		found = found || (strings.HasPrefix(p.What, "no base command line for the test kernels: it runs 6.12.78-kbisect-0123456789ab, a test kernel kbisect installed") &&
			p.Fix == "boot the host's own kernel once (reboot it), or give boot.base_cmdline in the job")
	}
	if !found || rd.Base != nil {
		t.Errorf("problems %+v, base %v", rd.Problems, rd.Base)
	}
	// The state recorded its base, or the job gives one: nothing to ask.
	for _, o := range []PreflightOptions{{BaseKnown: true}} {
		if rd, err := Preflight(context.Background(), job, o); err != nil || rd.Err() != nil {
			t.Errorf("with the base known: %v %v", err, rd.Err())
		}
	}
	job.Boot.BaseCmdline = "root=/dev/sda1"
	if rd, err := Preflight(context.Background(), job, PreflightOptions{}); err != nil || rd.Err() != nil {
		t.Errorf("with boot.base_cmdline: %v %v", err, rd.Err())
	}

	own, sim2 := hostJob(t, simhost.Kernel{Release: "6.1.0-28-amd64", Cmdline: "root=/dev/sda1 quiet"})
	sim2.SetCPUs(4)
	own.Build.Tree = configs.Path(tree)
	rd, err = Preflight(context.Background(), own, PreflightOptions{})
	if err != nil || rd.Err() != nil || rd.Base == nil || rd.Base.Cmdline != "root=/dev/sda1 quiet" || rd.Base.Release != "6.1.0-28-amd64" {
		t.Errorf("on the host's own kernel: %v %v %+v", err, rd.Err(), rd.Base)
	}
}

// TestAQEMUJobsPreflightChecksTheGuestsImage: boot.method qemu has no
// lab host to reach; its preflight (and host check) checks what a run
// starts the guest from.
func TestAQEMUJobsPreflightChecksTheGuestsImage(t *testing.T) {
	job, err := configs.Load("../configs/qemu-local.yaml", configs.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tree, image := t.TempDir(), t.TempDir()
	if out, err := exec.Command("git", "init", "-q", tree).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	job.Build.Tree, job.Boot.QEMU.Image = configs.Path(tree), configs.Path(image)
	job.Build.CacheDir = configs.Path(t.TempDir())
	rd, err := Preflight(context.Background(), job, PreflightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, p := range rd.Problems {
		found = found || (p.What == "the QEMU lab image is not in "+image+" (rootfs.img is missing): make it with kbisect lab image" &&
			p.Fix == "kbisect lab image --dir "+image+" (or set boot.qemu.image to where it is)")
	}
	if !found || rd.Host != "the local QEMU guest (boot.method qemu)" || rd.Checked != checkedQEMU {
		t.Errorf("host %q, problems %+v, checked %q", rd.Host, rd.Problems, rd.Checked)
	}
	for _, p := range rd.Problems {
		if strings.Contains(p.What, "CPU") {
			t.Errorf("qemu-local.yaml's CPUs fit its guest, yet: %+v", p)
		}
	}

	// A CPU beyond the guest's vCPUs would fail the first boot's
	// verification after a whole build: the preflight names it now.
	over := runtime.NumCPU() + 1
	job.Boot.QEMU.CPUs = over
	job.Boot.Params = fmt.Sprintf("nohz_full=1,%d isolcpus=nohz,domain,1 rcu_nocbs=1", over)
	rd, err = Preflight(context.Background(), job, PreflightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var guest configs.CPUs
	for i := range runtime.NumCPU() {
		guest = append(guest, i)
	}
	vcpus := guest.String()
	want := fmt.Sprintf("boot.params names CPUs the QEMU guest does not have: nohz_full %d (it has %d vCPUs (%s); boot.qemu.cpus %d is more than the host's %d cores: %d vCPUs)",
		over, runtime.NumCPU(), vcpus, over, runtime.NumCPU(), runtime.NumCPU())
	var cpuProblems []string
	for _, p := range rd.Problems {
		if strings.Contains(p.What, "CPU") {
			cpuProblems = append(cpuProblems, p.What+" | "+p.Fix)
		}
	}
	if len(cpuProblems) != 1 || cpuProblems[0] != want+" | name CPUs of "+vcpus+" in boot.params, or give the guest more vCPUs (boot.qemu.cpus, at most this machine's cores)" {
		t.Errorf("CPU problems:\n%s\nwant:\n%s", strings.Join(cpuProblems, "\n"), want)
	}
}
