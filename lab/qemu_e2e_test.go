package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kbisect/configs"
	"kbisect/noise"
	"kbisect/remote"
)

// TestQEMULabBootsAKernelAndCallsAPanicTheKernels: a built 6.12 RT kernel
// boots in the QEMU lab and runs with the job's parameters; the same
// kernel told to run an init that does not exist panics, QEMU ends, and
// that is the kernel's failure with the console's panic line, not the
// lab's. Heavy: KBISECT_E2E=1, a lab image in $KBISECT_E2E_LAB
// (/var/tmp/kbisect-lab) and a built kernel in $KBISECT_E2E_CACHE
// (/var/tmp/kbisect-e2e/cache; just e2e-qemu makes both).
func TestQEMULabBootsAKernelAndCallsAPanicTheKernels(t *testing.T) {
	if os.Getenv("KBISECT_E2E") == "" {
		t.Skip("QEMU boots: set KBISECT_E2E=1 (just e2e-qemu)")
	}
	labDir, cache := os.Getenv("KBISECT_E2E_LAB"), os.Getenv("KBISECT_E2E_CACHE")
	if labDir == "" {
		labDir = "/var/tmp/kbisect-lab"
	}
	if cache == "" {
		cache = "/var/tmp/kbisect-e2e/cache"
	}
	dirs, _ := filepath.Glob(filepath.Join(cache, "artifacts", "*", "bzImage"))
	if len(dirs) == 0 {
		t.Fatalf("no built kernel in %s (just e2e-qemu builds some)", cache)
	}
	art, err := remote.LoadArtifact(filepath.Dir(dirs[0]))
	if err != nil {
		t.Fatal(err)
	}
	job := &configs.Job{}
	job.Machine.Name = "qemu-e2e"
	job.Boot.Method = configs.BootQEMU
	job.Boot.Params = "nohz_full=1 isolcpus=nohz,domain,managed_irq,1 rcu_nocbs=1 irqaffinity=0"
	job.Boot.QEMU.Image = configs.Path(labDir)
	job.Boot.QEMU.CPUs = 2
	job.Boot.QEMU.Memory = 1 << 30
	job.Boot.Timeout = configs.Duration(2 * time.Minute)
	q, err := NewQEMULab(job, t.TempDir(), func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	start := time.Now()
	m, facts, err := q.Boot(ctx, art)
	if err != nil {
		t.Fatalf("boot: %v", err)
	}
	out, _, err := m.Run(ctx, noise.Cmd{Script: "cat /sys/devices/system/cpu/isolated; uname -v"})
	m.Close()
	if err != nil || !strings.HasPrefix(string(out), "1\n") || !strings.Contains(string(out), "PREEMPT_RT") || facts.Release != art.Release {
		t.Errorf("the guest runs %s: %q, %v", facts.Release, out, err)
	}
	t.Logf("booted %s and reached over SSH in %s", art.Release, time.Since(start).Round(100*time.Millisecond))

	job.Boot.Params += " init=/nonexistent"
	start = time.Now()
	_, _, err = q.Boot(ctx, art)
	var ke *remote.KernelError
	if !errors.As(err, &ke) || !strings.Contains(ke.Panic, "Kernel panic") {
		t.Fatalf("a kernel with no init: %v", err)
	}
	t.Logf("the panic was the kernel's in %s: %s", time.Since(start).Round(100*time.Millisecond), ke.Panic)
}
