package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/internal/simhost"
	"kbisect/remote"
)

// bootLab is an emulated host on its own kernel, and what reaches it.
type bootLab struct {
	sim *simhost.Host
	dir string
	kh  string
}

const (
	ownLine   = "BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-rt-amd64 root=/dev/sda1 ro quiet"
	bootParms = "nohz_full=1-3 isolcpus=nohz,domain,managed_irq,1-3 rcu_nocbs=1-3 irqaffinity=0"
)

func newBootLab(t *testing.T) *bootLab {
	t.Helper()
	sim := simhost.Start(t, simhost.Kernel{Release: "6.1.0-28-rt-amd64", Version: "#1 SMP PREEMPT_RT Debian", Cmdline: ownLine})
	l := &bootLab{sim: sim, dir: t.TempDir()}
	l.kh = filepath.Join(l.dir, "known_hosts")
	if err := os.WriteFile(l.kh, []byte(sim.KnownHostsLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

// job writes a job file for the host with extra as boot.extra_cmdline.
func (l *bootLab) job(t *testing.T, name, extra string) string {
	t.Helper()
	path := filepath.Join(l.dir, name+".yaml")
	yml := fmt.Sprintf(`apiVersion: kbisect/v1
kind: Job
machine: {name: box, cpus: 4}
host: {address: 127.0.0.1, port: %d, user: root, identity: %s, known_hosts: %s}
boot: {method: kexec, params: %q, extra_cmdline: %q, timeout: 30s, power_cycle: %q}
build: {tree: /}
`, l.sim.Port, l.sim.Identity, l.kh, bootParms, extra, l.sim.PowerCycleCommand)
	if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// artifact writes a built kernel of release.
func (l *bootLab) artifact(t *testing.T, release string) string {
	t.Helper()
	dir := filepath.Join(l.dir, release)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"kernel.release": release + "\n", "bzImage": "kernel " + release} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestAParameterOfOneJobNeverFollowsTheHostIntoTheNext: kbisect boot
// with a job that adds mitigations=off, then with one that does not: the
// second kernel boots from the host's own command line, not the running
// one's, so without it. A kernel that boots with a parameter left from
// the kernel before (a boot loader that ignores kbisect's line), or
// without one the job asks for, is never taken for the job's.
func TestAParameterOfOneJobNeverFollowsTheHostIntoTheNext(t *testing.T) {
	l := newBootLab(t)
	ctx := context.Background()
	withMitigationsOff, plain := l.job(t, "off", "mitigations=off"), l.job(t, "plain", "")
	boot := func(job, release string) (string, error) {
		var said strings.Builder
		_, err := Boot(ctx, job, l.artifact(t, release), &said)
		return said.String(), err
	}
	const rel1, rel2, rel3 = "6.12.78-kbisect-111111111111", "6.12.78-kbisect-222222222222", "6.12.78-kbisect-333333333333"
	if _, err := boot(withMitigationsOff, rel1); err != nil {
		t.Fatal(err)
	}
	if got, want := l.sim.Running().Cmdline, "root=/dev/sda1 ro quiet "+bootParms+" mitigations=off"; got != want {
		t.Fatalf("the first job's kernel runs with %q, want %q", got, want)
	}
	said, err := boot(plain, rel2)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.sim.Running().Cmdline, "root=/dev/sda1 ro quiet "+bootParms; got != want {
		t.Errorf("the second job's kernel runs with %q, want %q", got, want)
	}
	if !strings.Contains(said, "base command line: \""+ownLine+"\"") || !strings.Contains(said, "as the host recorded it when it last ran it; it runs "+rel1+" now") {
		t.Errorf("said %q", said)
	}

	// The next kernel boots with its predecessor's command line: the one
	// job's parameter leaks, and verification names it.
	if _, err := boot(withMitigationsOff, rel1); err != nil {
		t.Fatal(err)
	}
	l.sim.SetFault(rel2, simhost.FaultStaleCmdline)
	_, err = boot(plain, rel2)
	var ie *remote.InfraError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "mitigations=off is on the kernel command line, but neither the base command line nor the job has it") {
		t.Errorf("a leaked parameter: %v", err)
	}
	// And the other way round: the job's parameter is missing.
	if _, err := boot(plain, rel1); err != nil {
		t.Fatal(err)
	}
	l.sim.SetFault(rel3, simhost.FaultStaleCmdline)
	_, err = boot(withMitigationsOff, rel3)
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "mitigations=off is not on the kernel command line") {
		t.Errorf("a missing parameter: %v", err)
	}
}

// TestADamagedArtifactIsNotBooted: kbisect boot of an artifact whose
// image is not what its build recorded (cut short after a power loss)
// stops before the host is touched, naming the file and what to do.
func TestADamagedArtifactIsNotBooted(t *testing.T) {
	l := newBootLab(t)
	const rel = "6.12.78-kbisect-444444444444"
	dir := l.artifact(t, rel)
	meta := `{"release": "` + rel + `", "files": {"bzImage": {"size": 100, "sha256": "00"}, "kernel.release": {"size": 29, "sha256": "00"}}}`
	if err := os.WriteFile(filepath.Join(dir, "meta.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	var said strings.Builder
	_, err := Boot(context.Background(), l.job(t, "plain", ""), dir, &said)
	if err == nil || !strings.Contains(err.Error(), "boot --artifact: artifact "+dir+": bzImage is 35 bytes, the build wrote 100 (kbisect build builds it again)") {
		t.Errorf("got %v", err)
	}
	if l.sim.Installed(rel) || len(l.sim.Boots()) != 0 {
		t.Errorf("the damaged kernel went to the host: boots %v", l.sim.Boots())
	}
}
