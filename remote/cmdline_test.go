package remote

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/internal/simhost"
	"kbisect/internal/sshtest"
)

func TestEveryParameterExtraOrMissingIsNamed(t *testing.T) {
	want := "root=/dev/sda1 ro quiet nohz_full=1-3 rcu_nocbs=1-3 console=tty0 console=ttyS1,115200"
	for _, tc := range []struct {
		got  string
		diff []string
	}{
		// What grub adds by itself, and another order, are no difference.
		{"BOOT_IMAGE=/vmlinuz-6.12 initrd=/initrd.img console=tty0 root=/dev/sda1 ro quiet nohz_full=1-3 rcu_nocbs=1-3 console=ttyS1,115200", nil},
		{"root=/dev/sda1 ro quiet nohz_full=1-3 rcu_nocbs=1-3 console=tty0 console=ttyS1,115200 mitigations=off", []string{
			"mitigations=off is on the kernel command line, but neither the base command line nor the job has it"}},
		{"root=/dev/sda1 quiet nohz_full=1-3 rcu_nocbs=1-7 console=ttyS1,115200", []string{
			"ro is not on the kernel command line",
			"the command line has rcu_nocbs=1-7, not rcu_nocbs=1-3",
			"console=tty0 is not on the kernel command line"}},
		{"root=/dev/sda1 ro ro quiet nohz_full=1-3 rcu_nocbs=1-3 console=tty0 console=ttyS1,115200", []string{
			"ro is on the kernel command line, but neither the base command line nor the job has it"}},
	} {
		got := CmdlineDiff(want, tc.got)
		if strings.Join(got, "\n") != strings.Join(tc.diff, "\n") {
			t.Errorf("%s:\n got  %q\n want %q", tc.got, got, tc.diff)
		}
	}
	// A line that asks for initrd= has it checked like any other.
	if got := CmdlineDiff("root=/dev/vda initrd=/a.img", "root=/dev/vda initrd=/b.img"); len(got) != 1 || got[0] != "the command line has initrd=/b.img, not initrd=/a.img" {
		t.Errorf("initrd asked for: %q", got)
	}
}

func TestTheHostsOwnCommandLineIsReadOnItsOwnKernelAndRecordedForLater(t *testing.T) {
	sim, opt := simLab(t)
	b, err := dial(t, opt).OwnCmdline(context.Background())
	if err != nil || b.From != BaseFromRunning || b.Cmdline != ownCmdline || b.Release != defaultKernel || b.Running != defaultKernel {
		t.Fatalf("%+v %v", b, err)
	}
	// On the test kernel, the host's record answers: never the command
	// line the test kernel runs with.
	h, _, err := installAndBoot(t, sim, opt, sim.PowerCycleCommand)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	b, err = h.OwnCmdline(context.Background())
	if err != nil || b.From != BaseFromRecord || b.Cmdline != ownCmdline || b.Release != defaultKernel || b.Running != testKernel {
		t.Fatalf("%+v %v", b, err)
	}
	if !strings.Contains(b.String(), "as the host recorded it when it last ran it; it runs "+testKernel+" now") {
		t.Errorf("%s", b)
	}
}

func TestATestKernelWithoutTheHostsRecordIsNoBase(t *testing.T) {
	sim := simhost.Start(t, simhost.Kernel{Release: "6.12.78-kbisect-0123456789ab", Version: "#1 SMP PREEMPT_RT", Cmdline: "root=/dev/sda1 mitigations=off"})
	opt := simOptions(t, sim)
	_, err := dial(t, opt).OwnCmdline(context.Background())
	if err == nil || !strings.Contains(err.Error(), "it runs 6.12.78-kbisect-0123456789ab, a test kernel kbisect installed, and holds no record") ||
		!strings.Contains(err.Error(), "boot the host's own kernel once (reboot it), or give boot.base_cmdline") {
		t.Errorf("%v", err)
	}
}

func TestABootWithoutABaseCommandLineIsRefused(t *testing.T) {
	_, opt := simLab(t)
	h := installTestKernel(t, opt, InstallOptions{Keep: 3})
	_, _, err := Boot(context.Background(), h, redialer(opt), BootOptions{Method: MethodKexec, Release: testKernel, Params: labParams})
	if err == nil || !strings.Contains(err.Error(), "no base command line") {
		t.Errorf("%v", err)
	}
}

// TestTheOwnCommandLineScriptOnARealHost runs the script itself with sh
// over a real sshd, its paths under a directory: this machine's kernel is
// the host's own at first, then (with kbisect's mark for its release) a
// test kernel, which is answered from the record, and without the record
// refused.
func TestTheOwnCommandLineScriptOnARealHost(t *testing.T) {
	s := sshtest.Start(t)
	h := dial(t, options(s))
	ctx := context.Background()
	root := t.TempDir()
	proc, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	release, err := sshtest.RunLocal("uname", "-r")
	if err != nil {
		t.Fatal(err)
	}
	rel := strings.TrimSpace(string(release))
	if strings.Contains(rel, "-kbisect-") {
		t.Skipf("this machine runs %s, a kbisect kernel", rel)
	}
	b, err := h.ownCmdline(ctx, root)
	if err != nil || b.From != BaseFromRunning || b.Cmdline != strings.TrimSpace(string(proc)) || b.Release != rel {
		t.Fatalf("%+v %v", b, err)
	}
	rec, err := os.ReadFile(filepath.Join(root, OwnCmdlineRecord))
	if err != nil || string(rec) != rel+"\n"+string(proc) {
		t.Fatalf("recorded %q %v", rec, err)
	}
	// The same kernel marked as kbisect's: the record answers. A record
	// that says otherwise than /proc/cmdline proves it is the record.
	if err := os.MkdirAll(filepath.Join(root, "boot"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "boot", ".kbisect-"+rel), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, OwnCmdlineRecord), []byte("6.1.0-28-amd64\nroot=/dev/sda1 ro\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err = h.ownCmdline(ctx, root)
	if err != nil || b.From != BaseFromRecord || b.Cmdline != "root=/dev/sda1 ro" || b.Release != "6.1.0-28-amd64" || b.Running != rel {
		t.Fatalf("from the record: %+v %v", b, err)
	}
	if err := os.Remove(filepath.Join(root, OwnCmdlineRecord)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ownCmdline(ctx, root); err == nil || !strings.Contains(err.Error(), "a test kernel kbisect installed, and holds no record") {
		t.Errorf("without a record: %v", err)
	}
}
