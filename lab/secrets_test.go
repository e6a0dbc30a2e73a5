package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kbisect/configs"
	"kbisect/internal/sshtest"
	"kbisect/remote"
)

// TestLocalCommandsSecretsNeverReachTheHost installs and boots a kernel
// on a real sshd that records everything each session brings (command,
// environment, standard input) with a job whose power cycle and console,
// which run here, use a BMC password: the host must never see its value,
// while the console here does.
func TestLocalCommandsSecretsNeverReachTheHost(t *testing.T) {
	s := sshtest.StartRecording(t)
	secret := fmt.Sprintf("bmc-%d-s3cret", time.Now().UnixNano())
	t.Setenv("BMC_PASSWORD", secret)
	t.Setenv("BOOT_TOKEN", "boot-token-for-the-host")
	dir := t.TempDir()
	saw, cycled := filepath.Join(dir, "console-saw"), filepath.Join(dir, "power-cycled")
	path := filepath.Join(dir, "job.yaml")
	yml := fmt.Sprintf(`apiVersion: kbisect/v1
kind: Job
machine: {name: rt-box, cpus: 4}
host: {address: 127.0.0.1, port: %d, user: %s, identity: %s, known_hosts: %s}
boot:
  method: script
  params: nohz_full=1-3 isolcpus=1-3
  base_cmdline: root=/dev/sda1 ro
  script: 'test -n "${BOOT_TOKEN}"'
  power_cycle: 'printf "%%s\n" "${BMC_PASSWORD}" > %s'
  console: 'printf "%%s\n" "${BMC_PASSWORD}" > %s; sleep 30'
build: {tree: /}
`, s.Port, s.User, s.Identity, s.KnownHosts, cycled, saw)
	if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	job, err := configs.Load(path, configs.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	image := filepath.Join(dir, "bzImage")
	if err := os.WriteFile(image, []byte("a kernel image"), 0o644); err != nil {
		t.Fatal(err)
	}
	art := remote.Artifact{Release: "6.12.78-kbisect-0123456789ab", Image: image}

	// BootArtifact's steps, with the install rooted in a directory
	// rather than this machine's /boot.
	ctx := context.Background()
	h, err := DialHost(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := installOptions(job)
	if err != nil {
		t.Fatal(err)
	}
	inst.Root = filepath.Join(dir, "root")
	if err := h.Install(ctx, art, inst); err != nil {
		t.Fatal(err)
	}
	bo, err := bootOptions(job, art, job.Boot.BaseCmdline, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(bo.LocalEnv, "BMC_PASSWORD="+secret) {
		t.Errorf("the power cycle and console here lack their secret: %q", bo.LocalEnv)
	}
	bo.Timeout = 2 * time.Second
	opt, _ := HostOptions(job)
	// The host never reboots (or is not back after the power cycle):
	// the boot is the lab's failure, after the script and the console
	// ran.
	_, _, err = remote.Boot(ctx, h, remote.DialerOf(opt), bo)
	var ie *remote.InfraError
	if !errors.As(err, &ie) {
		t.Fatalf("boot: %v", err)
	}

	got, err := os.ReadFile(s.Received)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"# kbisect:install", "# kbisect:script", "export BOOT_TOKEN=boot-token-for-the-host"} {
		if !strings.Contains(string(got), op) {
			t.Errorf("the host never got %q: the test proves nothing\n%s", op, got)
		}
	}
	if n := strings.Count(string(got), secret); n > 0 {
		t.Errorf("the BMC password reached the host %d times:\n%s", n, got)
	}
	if b, err := os.ReadFile(saw); err != nil || strings.TrimSpace(string(b)) != secret {
		t.Errorf("the console here did not get its secret: %q %v", b, err)
	}
	if b, err := os.ReadFile(cycled); err == nil && strings.TrimSpace(string(b)) != secret {
		t.Errorf("the power cycle here did not get its secret: %q", b)
	}
}
