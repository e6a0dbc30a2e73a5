package remote

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kbisect/internal/shell"
	"kbisect/internal/simhost"
	"kbisect/internal/sshtest"
)

// ownCmdline is the emulated host's own kernel's command line.
const ownCmdline = "BOOT_IMAGE=/boot/vmlinuz-" + defaultKernel + " root=/dev/sda1 ro quiet " + labParams

const (
	defaultKernel = "6.1.0-28-rt-amd64"
	testKernel    = "6.12.78-kbisect"
	labParams     = "nohz_full=1-3 isolcpus=nohz,domain,managed_irq,1-3 rcu_nocbs=1-3 irqaffinity=0"
)

// simLab is an emulated lab host running its default kernel, and the
// options that reach it.
func simLab(t *testing.T) (*simhost.Host, Options) {
	t.Helper()
	sim := simhost.Start(t, simhost.Kernel{Release: defaultKernel, Version: "#1 SMP PREEMPT_RT Debian 6.1.119-1",
		Cmdline: ownCmdline,
		Config:  "#\n# Linux/x86 6.1.119 Kernel Configuration\n#\nCONFIG_PREEMPT_RT=y\nCONFIG_NO_HZ_FULL=y\n# CONFIG_DEBUG_PREEMPT is not set\n"})
	return sim, simOptions(t, sim)
}

// simOptions reach an emulated host.
func simOptions(t *testing.T, sim *simhost.Host) Options {
	t.Helper()
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(sim.KnownHostsLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return Options{Address: "127.0.0.1", Port: sim.Port, User: "root", Identity: sim.Identity, KnownHosts: kh, ConnectTimeout: 2 * time.Second}
}

// installTestKernel connects to the host and installs the test kernel.
func installTestKernel(t *testing.T, opt Options, inst InstallOptions) *Host {
	t.Helper()
	h := dial(t, opt)
	image := filepath.Join(t.TempDir(), "bzImage")
	if err := os.WriteFile(image, []byte("a kernel image"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.Install(context.Background(), Artifact{Release: testKernel, Image: image}, inst); err != nil {
		t.Fatal(err)
	}
	return h
}

// redialer connects to the host again as a boot needs, with the options
// of the first connection.
func redialer(opt Options) Dialer {
	return func(ctx context.Context) (*Host, error) { return Dial(ctx, opt) }
}

// installAndBoot installs the test kernel and boots it with the lab's
// parameters, with a short boot timeout.
func installAndBoot(t *testing.T, sim *simhost.Host, opt Options, powerCycle string) (*Host, Facts, error) {
	t.Helper()
	h := installTestKernel(t, opt, InstallOptions{Keep: 3})
	if !sim.Installed(testKernel) {
		t.Fatal("not installed")
	}
	return Boot(context.Background(), h, redialer(opt), BootOptions{
		Method: MethodKexec, BaseCmdline: ownCmdline, Release: testKernel, Params: labParams, ExtraCmdline: "console=ttyS1,115200",
		Timeout: 3 * time.Second, PowerCycle: powerCycle,
		Expect: Expect{Release: testKernel, Params: labParams, PreemptRT: true},
	})
}

func TestAKexecBootRunsTheNewKernelWithTheJobsParameters(t *testing.T) {
	sim, opt := simLab(t)
	h, f, err := installAndBoot(t, sim, opt, sim.PowerCycleCommand)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if f.Release != testKernel || f.Isolated != "1-3" || f.NohzFull != "1-3" || !f.PreemptRT {
		t.Errorf("%+v", f)
	}
	// The command line keeps root= and the rest, drops BOOT_IMAGE, and
	// carries the job's parameters once.
	if want := "root=/dev/sda1 ro quiet " + labParams + " console=ttyS1,115200"; sim.Running().Cmdline != want {
		t.Errorf("cmdline %q\nwant    %q", sim.Running().Cmdline, want)
	}
}

func TestAKernelThatNeverComesBackIsAKernelFailureAfterAPowerCycle(t *testing.T) {
	sim, opt := simLab(t)
	sim.SetFault(testKernel, simhost.FaultNeverBack)
	start := time.Now()
	_, _, err := installAndBoot(t, sim, opt, sim.PowerCycleCommand)
	var ke *KernelError
	if !errors.As(err, &ke) || !strings.Contains(err.Error(), "did not answer SSH within 3s") || !strings.Contains(err.Error(), "the host was power-cycled and is back on "+defaultKernel) {
		t.Fatalf("got %T %v", err, err)
	}
	if sim.Running().Release != defaultKernel || strings.Join(sim.Boots(), ", ") != testKernel+" (hung), "+defaultKernel+" (power cycle)" {
		t.Errorf("running %s, boots %v", sim.Running().Release, sim.Boots())
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestTheConsoleOfAHungKernelIsAttachedToItsFailure(t *testing.T) {
	sim, opt := simLab(t)
	sim.SetFault(testKernel, simhost.FaultNeverBack)
	h := installTestKernel(t, opt, InstallOptions{})
	var log strings.Builder
	_, _, err := Boot(context.Background(), h, redialer(opt), BootOptions{Method: MethodKexec, Release: testKernel, BaseCmdline: ownCmdline, Params: labParams, Timeout: 2 * time.Second,
		PowerCycle: sim.PowerCycleCommand, ConsoleLog: &log,
		Console: `printf '[    1.234] VFS: Cannot open root device\r\n[    1.235] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\r\n'; exec sleep 600`})
	var ke *KernelError
	if !errors.As(err, &ke) || ke.Panic != "[    1.235] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)" ||
		!strings.Contains(err.Error(), "; the console says: [    1.235] Kernel panic") || !strings.Contains(ke.Console, "VFS: Cannot open root device") {
		t.Fatalf("got %v (%+v)", err, ke)
	}
	if !strings.Contains(log.String(), "Kernel panic") {
		t.Errorf("console log %q", log.String())
	}
}

func TestAKernelThatPanicsAndRebootsIsAKernelFailure(t *testing.T) {
	sim, opt := simLab(t)
	sim.SetFault(testKernel, simhost.FaultPanicReboot)
	_, _, err := installAndBoot(t, sim, opt, sim.PowerCycleCommand)
	var ke *KernelError
	if !errors.As(err, &ke) || !strings.Contains(err.Error(), "the host came back on "+defaultKernel+" instead: the kernel did not boot") {
		t.Errorf("got %T %v", err, err)
	}
}

func TestWithoutAPowerCycleAHungKernelStopsTheRun(t *testing.T) {
	sim, opt := simLab(t)
	sim.SetFault(testKernel, simhost.FaultNeverBack)
	_, _, err := installAndBoot(t, sim, opt, "")
	var ie *InfraError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "there is no boot.power_cycle to get the host back") {
		t.Errorf("got %T %v", err, err)
	}
}

func TestTheWrongKernelIsNeverMeasured(t *testing.T) {
	for fault, want := range map[simhost.Fault]string{
		simhost.FaultWrongRelease: "the running kernel is " + simhost.WrongRelease + ", not " + testKernel,
		simhost.FaultNoIsolation:  "nohz_full=1-3 is not on the kernel command line",
	} {
		sim, opt := simLab(t)
		sim.SetFault(testKernel, fault)
		_, _, err := installAndBoot(t, sim, opt, sim.PowerCycleCommand)
		var ie *InfraError
		if !errors.As(err, &ie) || ie.Op != "verify" || !strings.Contains(err.Error(), want) {
			t.Errorf("fault %d: got %T %v", fault, err, err)
		}
	}
}

func TestAGrubOneShotBootRunsTheNewKernel(t *testing.T) {
	sim, opt := simLab(t)
	h := installTestKernel(t, opt, InstallOptions{})
	nh, f, err := Boot(context.Background(), h, redialer(opt), BootOptions{Method: MethodGrub, Release: testKernel, BaseCmdline: ownCmdline, Params: labParams, Timeout: 3 * time.Second,
		Expect: Expect{Release: testKernel, Params: labParams}})
	if err != nil {
		t.Fatal(err)
	}
	nh.Close()
	if f.Release != testKernel || sim.Running().Cmdline != "root=/dev/sda1 ro quiet "+labParams {
		t.Errorf("%+v, cmdline %q", f, sim.Running().Cmdline)
	}
}

func TestKexecCmdlineReplacesTheIsolation(t *testing.T) {
	got := BootCmdline(`BOOT_IMAGE=/boot/vmlinuz-6.1 root=UUID=abc ro nohz_full=1-7 quiet dyndbg="file x +p" initrd=/initrd.img`, "nohz_full=1-3 isolcpus=1-3", "console=ttyS0")
	if want := `root=UUID=abc ro quiet dyndbg="file x +p" nohz_full=1-3 isolcpus=1-3 console=ttyS0`; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestInstallKeepsTheNewestKernelsAndNeverTheRunningOne(t *testing.T) {
	s := sshtest.Start(t)
	h := dial(t, options(s))
	root := t.TempDir()
	running, _ := sshtest.RunLocal("uname", "-r")
	run := strings.TrimSpace(string(running))
	// The running kernel was installed by kbisect long ago.
	if err := os.MkdirAll(filepath.Join(root, "boot"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{".kbisect-" + run, "vmlinuz-" + run} {
		if err := os.WriteFile(filepath.Join(root, "boot", f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	_ = os.Chtimes(filepath.Join(root, "boot", ".kbisect-"+run), old, old)
	for i, rel := range []string{"6.12.57-kbisect", "6.12.60-kbisect", "6.12.78-kbisect"} {
		art := filepath.Join(t.TempDir(), "art")
		mods := filepath.Join(art, "modules", "kernel")
		if err := os.MkdirAll(mods, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = os.WriteFile(filepath.Join(art, "bzImage"), []byte(rel), 0o644)
		_ = os.WriteFile(filepath.Join(mods, "m.ko"), []byte(rel), 0o644)
		if err := h.Install(context.Background(), Artifact{Release: rel, Image: filepath.Join(art, "bzImage"), Modules: filepath.Join(art, "modules")},
			InstallOptions{Keep: 2, Root: root}); err != nil {
			t.Fatal(err)
		}
		// Distinct modification times, oldest first.
		when := time.Now().Add(time.Duration(i-3) * time.Minute)
		_ = os.Chtimes(filepath.Join(root, "boot", ".kbisect-"+rel), when, when)
	}
	var got []string
	entries, _ := os.ReadDir(filepath.Join(root, "boot"))
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := ".kbisect-6.12.60-kbisect .kbisect-6.12.78-kbisect .kbisect-" + run + " vmlinuz-6.12.60-kbisect vmlinuz-6.12.78-kbisect vmlinuz-" + run
	if strings.Join(got, " ") != want {
		t.Errorf("/boot holds %v\nwant %s", got, want)
	}
	if _, err := os.Stat(filepath.Join(root, "lib/modules/6.12.57-kbisect")); !os.IsNotExist(err) {
		t.Errorf("the oldest kernel's modules are still there: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "lib/modules/6.12.78-kbisect/kernel/m.ko")); err != nil || string(b) != "6.12.78-kbisect" {
		t.Errorf("modules: %q %v", b, err)
	}
}

func TestAnImageKexecRefusesIsAKernelFailure(t *testing.T) {
	sim, opt := simLab(t)
	sim.SetFault(testKernel, simhost.FaultKexecRejected)
	h := installTestKernel(t, opt, InstallOptions{})
	_, _, err := Boot(context.Background(), h, redialer(opt), BootOptions{Method: MethodKexec, Release: testKernel, BaseCmdline: ownCmdline, Params: labParams, Timeout: 2 * time.Second})
	var ke *KernelError
	if !errors.As(err, &ke) || !strings.Contains(err.Error(), "kexec refused the image: kexec_load failed: Invalid argument") {
		t.Errorf("got %T %v", err, err)
	}
}

// TestAKexecLoadThatFailsForTheHostIsALabFailure: kexec_load failing with
// ENOMEM (or an image that is not there) is the lab's, never a skip.
func TestAKexecLoadThatFailsForTheHostIsALabFailure(t *testing.T) {
	sim, opt := simLab(t)
	sim.SetFault(testKernel, simhost.FaultKexecNoMemory)
	h := installTestKernel(t, opt, InstallOptions{})
	_, _, err := Boot(context.Background(), h, redialer(opt), BootOptions{Method: MethodKexec, Release: testKernel, BaseCmdline: ownCmdline, Params: labParams, Timeout: 2 * time.Second})
	var ie *InfraError
	if !errors.As(err, &ie) || errors.As(err, new(*KernelError)) || !strings.Contains(err.Error(), "kexec could not load "+testKernel+", not for the kernel's fault: kexec_load failed: Cannot allocate memory") {
		t.Errorf("got %T %v", err, err)
	}
	// Never installed: kexec -l cannot open it, and that is the lab's too.
	_, _, err = Boot(context.Background(), dial(t, opt), redialer(opt), BootOptions{Method: MethodKexec, Release: "6.12.79-kbisect", BaseCmdline: ownCmdline, Params: labParams, Timeout: 2 * time.Second})
	if !errors.As(err, &ie) || errors.As(err, new(*KernelError)) {
		t.Errorf("a missing image: got %T %v", err, err)
	}
}

// TestTheKexecScriptTypesTheLoadsFailureOnTheHost runs the kexec script
// that goes to the host with a kexec that fails as kexec-tools does: the
// script's exit code carries the class, so nothing reads text later.
func TestTheKexecScriptTypesTheLoadsFailureOnTheHost(t *testing.T) {
	bin := t.TempDir()
	for name, body := range map[string]string{
		"kexec":     "#!/bin/sh\nprintf '%s\\n' \"$KEXEC_SAYS\" >&2\nexit 255\n",
		"systemctl": "#!/bin/sh\nexit 1\n", // never reached: the load fails first
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for says, want := range map[string]int{
		"kexec_load failed: Invalid argument":                      exitKexecRejected,
		"kexec_file_load failed: Exec format error":                exitKexecRejected,
		"Cannot determine the file type of /boot/vmlinuz-x":        exitKexecRejected,
		"kexec_load failed: Cannot allocate memory":                exitKexecLab,
		"kexec_load failed: Device or resource busy":               exitKexecLab,
		"kexec_load failed: Operation not permitted":               exitKexecLab,
		"Cannot open `/boot/vmlinuz-x': No such file or directory": exitKexecLab,
		"kexec_file_load failed: Key was rejected by service":      exitKexecLab,
	} {
		c := exec.Command("sh", "-s")
		c.Stdin = strings.NewReader(kexecScript(testKernel, "root=/dev/sda1 nohz_full=1-3"))
		c.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "KEXEC_SAYS="+says)
		var stderr strings.Builder
		c.Stderr = &stderr
		err := c.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != want || !strings.Contains(stderr.String(), says) {
			t.Errorf("%q: %v (want exit %d), stderr %q", says, err, want, stderr.String())
		}
	}
	// Without kexec on the PATH: 127, the lab's.
	c := exec.Command("sh", "-s")
	c.Stdin = strings.NewReader(kexecScript(testKernel, "root=/dev/sda1"))
	c.Env = append(os.Environ(), "PATH="+t.TempDir())
	if err := c.Run(); err == nil || c.ProcessState.ExitCode() != 127 {
		t.Errorf("without kexec: %v", err)
	}
}

func TestSudoThatWantsAPasswordSaysSo(t *testing.T) {
	sim, opt := simLab(t)
	sim.SudoNeedsPassword()
	opt.Sudo = true
	h := dial(t, opt)
	_, _, err := h.Run(context.Background(), shell.Cmd{Script: "id -u"})
	var ie *InfraError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "host.sudo needs passwordless sudo for root (NOPASSWD in sudoers)") {
		t.Errorf("got %T %v", err, err)
	}
}

func TestReleasesAndCommandLinesCannotInject(t *testing.T) {
	_, opt := simLab(t)
	h := dial(t, opt)
	for _, rel := range []string{"6.1$(touch /tmp/pwned)", "6.1\nid\n#", "6.1'x", ""} {
		if err := h.Install(context.Background(), Artifact{Release: rel, Image: "/dev/null"}, InstallOptions{}); err == nil || !strings.Contains(err.Error(), "is not a kernel release") {
			t.Errorf("install %q: %v", rel, err)
		}
		if _, _, err := Boot(context.Background(), dial(t, opt), redialer(opt), BootOptions{Method: MethodKexec, Release: rel}); err == nil || !strings.Contains(err.Error(), "is not a kernel release") {
			t.Errorf("boot %q: %v", rel, err)
		}
	}
	// grub reads the command line as script: every word is quoted for it.
	if got := grubWords(`quiet x=$foo a;b it's`); got != `'quiet' 'x=$foo' 'a;b' 'it'\''s'` {
		t.Errorf("grub words %s", got)
	}
	// A job's command ending in a comment still closes its group.
	if step := initramfsStep("mkinitcpio -k $KBISECT_RELEASE # arch", "6.12"); step != "(\nmkinitcpio -k $KBISECT_RELEASE # arch\n)" {
		t.Errorf("step %q", step)
	}
}

func TestTheCommandLineDoesNotGrowBootAfterBoot(t *testing.T) {
	line := "BOOT_IMAGE=/boot/vmlinuz-6.1 root=/dev/sda1 ro quiet kvm-intel.nested=1"
	for i := 0; i < 4; i++ {
		line = BootCmdline(line, "nohz_full=1-3 mitigations=off", "console=ttyS1,115200")
	}
	if want := "root=/dev/sda1 ro quiet kvm-intel.nested=1 nohz_full=1-3 mitigations=off console=ttyS1,115200"; line != want {
		t.Errorf("got  %q\nwant %q", line, want)
	}
	if got := BootCmdline("quiet xquiet=1", "", ""); got != "quiet xquiet=1" {
		t.Errorf("bare flags: %q", got)
	}
}
