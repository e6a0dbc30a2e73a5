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
	"kbisect/internal/shell"
	"kbisect/progress"
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
	labDir, cache := e2eLab()
	arts := e2eArtifacts(t, cache, 1)
	art := arts[0]
	job := e2eQEMUJob(labDir)
	q, err := NewQEMULab(job, t.TempDir(), progress.Func(func(e progress.Event) { t.Log(e.Text) }))
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
	out, _, err := m.Run(ctx, shell.Cmd{Script: "cat /sys/devices/system/cpu/isolated; uname -v"})
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

// TestQEMULabKexecsTheNextKernel: with boot.qemu.reboot kexec, the first
// kernel boots in a fresh guest and the next ones by kexec inside it
// (the same QEMU process), with the job's parameters; a kernel that
// panics after kexec ends QEMU and is the kernel's failure; the next
// boot starts a fresh guest again. The log gives both boot times.
func TestQEMULabKexecsTheNextKernel(t *testing.T) {
	if os.Getenv("KBISECT_E2E") == "" {
		t.Skip("QEMU boots: set KBISECT_E2E=1 (just e2e-qemu)")
	}
	labDir, cache := e2eLab()
	arts := e2eArtifacts(t, cache, 2)
	job := e2eQEMUJob(labDir)
	job.Boot.QEMU.Reboot = configs.RebootKexec
	q, err := NewQEMULab(job, t.TempDir(), progress.Func(func(e progress.Event) { t.Log(e.Text) }))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	bootID := ""
	for i, art := range []remote.Artifact{arts[0], arts[1], arts[0]} {
		start := time.Now()
		vm := q.vm
		m, facts, err := q.Boot(ctx, art)
		if err != nil {
			t.Fatalf("boot %d (%s): %v", i+1, art.Release, err)
		}
		took := time.Since(start)
		out, _, err := m.Run(ctx, shell.Cmd{Script: "cat /sys/devices/system/cpu/isolated"})
		m.Close()
		if err != nil || string(out) != "1\n" || facts.Release != art.Release || facts.BootID == bootID {
			t.Errorf("boot %d: %s (boot id %s): isolated %q, %v", i+1, facts.Release, facts.BootID, out, err)
		}
		bootID = facts.BootID
		how := "a fresh guest"
		if i > 0 {
			how = "kexec in the guest"
			if q.vm != vm {
				t.Errorf("boot %d started another QEMU instead of kexec", i+1)
			}
		}
		t.Logf("boot %d: %s by %s in %s", i+1, art.Release, how, took.Round(100*time.Millisecond))
	}

	job.Boot.Params += " init=/nonexistent"
	start := time.Now()
	_, _, err = q.Boot(ctx, arts[1])
	var ke *remote.KernelError
	if !errors.As(err, &ke) || !strings.Contains(ke.Panic, "Kernel panic") {
		t.Fatalf("a kernel with no init, by kexec: %v", err)
	}
	t.Logf("a panic after kexec was the kernel's in %s: %s", time.Since(start).Round(100*time.Millisecond), ke.Panic)
	job.Boot.Params = strings.TrimSuffix(job.Boot.Params, " init=/nonexistent")
	start = time.Now()
	m, facts, err := q.Boot(ctx, arts[1])
	if err != nil {
		t.Fatalf("the boot after the panic: %v", err)
	}
	m.Close()
	t.Logf("then a fresh guest booted %s in %s", facts.Release, time.Since(start).Round(100*time.Millisecond))
}

func e2eLab() (labDir, cache string) {
	labDir, cache = os.Getenv("KBISECT_E2E_LAB"), os.Getenv("KBISECT_E2E_CACHE")
	if labDir == "" {
		labDir = "/var/tmp/kbisect-lab"
	}
	if cache == "" {
		cache = "/var/tmp/kbisect-e2e/cache"
	}
	return labDir, cache
}

// e2eArtifacts returns n built kernels of different releases from the
// e2e kernel cache.
func e2eArtifacts(t *testing.T, cache string, n int) []remote.Artifact {
	t.Helper()
	images, _ := filepath.Glob(filepath.Join(cache, "artifacts", "*", "bzImage"))
	var arts []remote.Artifact
	seen := map[string]bool{}
	for _, im := range images {
		art, err := remote.LoadArtifact(filepath.Dir(im))
		if err != nil || seen[art.Release] {
			continue
		}
		seen[art.Release] = true
		arts = append(arts, art)
		if len(arts) == n {
			return arts
		}
	}
	t.Fatalf("%d built kernels in %s, want %d (just e2e-qemu builds some)", len(arts), cache, n)
	return nil
}

func e2eQEMUJob(labDir string) *configs.Job {
	job := &configs.Job{}
	job.Machine.Name = "qemu-e2e"
	job.Boot.Method = configs.BootQEMU
	job.Boot.Params = "nohz_full=1 isolcpus=nohz,domain,managed_irq,1 rcu_nocbs=1 irqaffinity=0"
	job.Boot.QEMU.Image = configs.Path(labDir)
	job.Boot.QEMU.CPUs = 2
	job.Boot.QEMU.Memory = 1 << 30
	job.Boot.Timeout = configs.Duration(2 * time.Minute)
	return job
}
