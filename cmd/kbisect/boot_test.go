package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/internal/simhost"
)

func TestBootInstallsBootsAndVerifiesOnAnEmulatedHost(t *testing.T) {
	params := "nohz_full=1-3 isolcpus=nohz,domain,managed_irq,1-3 rcu_nocbs=1-3 irqaffinity=0"
	sim := simhost.Start(t, simhost.Kernel{Release: "6.1.0-28-rt-amd64", Version: "#1 SMP PREEMPT_RT Debian",
		Cmdline: "BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-rt-amd64 root=/dev/sda1 ro quiet"})
	dir := t.TempDir()
	kh := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(kh, []byte(sim.KnownHostsLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	art := filepath.Join(dir, "artifact")
	for name, content := range map[string]string{"kernel.release": "6.12.78-kbisect\n", "bzImage": "kernel", "modules/kernel/fs/ext4.ko": "module"} {
		p := filepath.Join(art, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	job := jobFile(t, fmt.Sprintf(`apiVersion: kbisect/v1
kind: Job
machine: {name: box, cpus: 4}
host: {address: 127.0.0.1, port: %d, user: root, identity: %s, known_hosts: %s}
boot: {method: kexec, params: %q, timeout: 30s, power_cycle: %q}
build: {tree: /}
`, sim.Port, sim.Identity, kh, params, sim.PowerCycleCommand))
	code, stdout, stderr := runCLI(t, context.Background(), "boot", "--job", job, "--artifact", art)
	if code != exitOK || !strings.Contains(stdout, "ok: 6.12.78-kbisect runs with the job's boot parameters\n") ||
		!strings.Contains(stdout, "nohz_full:  1-3\n") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if sim.Running().Release != "6.12.78-kbisect" || !strings.Contains(sim.Running().Cmdline, params) {
		t.Errorf("running %+v", sim.Running())
	}
	code, _, stderr = runCLI(t, context.Background(), "boot", "--job", job, "--artifact", dir)
	if code != exitUsage || !strings.Contains(stderr, "kernel.release") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}
