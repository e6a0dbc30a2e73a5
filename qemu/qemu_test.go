package qemu

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestCmdlineBootsTheKernelWithTheJobsParametersOnASnapshot(t *testing.T) {
	o := Options{Kernel: "/k/bzImage", Image: "/lab/rootfs.img", Memory: 1 << 30, CPUs: 2, Accel: "tcg",
		Params: "nohz_full=1 isolcpus=nohz,domain,managed_irq,1", SSHPort: 40022, Args: []string{"-rtc", "base=utc"}}
	argv := o.Cmdline()
	joined := strings.Join(argv, " ")
	for _, want := range []string{"qemu-system-x86_64 ", "-no-reboot", "-accel tcg,thread=multi -cpu max", "-smp 2", "-m 1024M",
		"-kernel /k/bzImage", "file=/lab/rootfs.img,format=raw,if=virtio,snapshot=on", "hostfwd=tcp:127.0.0.1:40022-:22", "-rtc base=utc"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the command line lacks %q: %s", want, joined)
		}
	}
	i := slices.Index(argv, "-append")
	if i < 0 || argv[i+1] != "console=ttyS0 root=/dev/vda rw rootfstype=ext4 init=/sbin/kbisect-init panic=-1 nohz_full=1 isolcpus=nohz,domain,managed_irq,1" {
		t.Errorf("-append %q", argv[i+1])
	}
	o.Accel, o.Memory = "kvm", 0
	if joined := strings.Join(o.Cmdline(), " "); !strings.Contains(joined, "-accel kvm -cpu host") || !strings.Contains(joined, "-m 256M") {
		t.Errorf("kvm, no memory given: %s", joined)
	}
}

func TestCPUsNeverExceedTheHostsCores(t *testing.T) {
	n := runtime.NumCPU()
	if got, note := CPUs(n + 2); got != n || note == "" {
		t.Errorf("CPUs(%d) = %d, %q", n+2, got, note)
	}
	if got, note := CPUs(1); got != 1 || note != "" {
		t.Errorf("CPUs(1) = %d, %q", got, note)
	}
}

func TestImageSaysWhatIsMissingAndWritesKnownHosts(t *testing.T) {
	im := Image{Dir: t.TempDir()}
	if err := im.Check(); err == nil || !strings.Contains(err.Error(), "kbisect lab image") {
		t.Errorf("an empty image dir: %v", err)
	}
	for _, f := range []string{im.RootFS(), im.Key()} {
		os.WriteFile(f, []byte("x"), 0o600)
	}
	os.WriteFile(im.HostKey(), []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK kbisect-lab-host\n"), 0o644)
	if err := im.Check(); err != nil {
		t.Fatal(err)
	}
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := im.KnownHosts(kh, 40022); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(kh); string(b) != "[127.0.0.1]:40022 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK\n" {
		t.Errorf("known_hosts: %q", b)
	}
}
