package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"kbisect/internal/sshtest"
)

// sshJob is a job file whose host is the test sshd: this machine, its
// CPUs, booted by a script (its user space has no kexec to count on).
func sshJob(t *testing.T, s *sshtest.Server, params, workload string) string {
	t.Helper()
	return jobFile(t, fmt.Sprintf(`apiVersion: kbisect/v1
kind: Job
machine: {name: box, cpus: %d}
host: {address: 127.0.0.1, port: %d, user: %s, identity: %s, known_hosts: %s}
boot: {method: script, script: "true", power_cycle: "true", params: %q}
build: {tree: %s}
workload: %s
`, localCPUs(t), s.Port, s.User, s.Identity, s.KnownHosts, params, emptyRepo(t), workload))
}

// emptyRepo is a git repository with no commits: a tree to name.
func emptyRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := sshtest.RunLocal("git", "init", "-q", dir); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	return dir
}

func TestHostCheckSaysWhatRunsAndWhatIsWrong(t *testing.T) {
	s := sshtest.Start(t)
	// This machine was booted with "quiet": a job asking only for that
	// finds it in effect.
	ok := sshJob(t, s, "quiet", `{tool: command, cpus: 1, command: "echo 'Run time: 8ms'", pattern: 'Run time: (\d+)ms', unit: ms}
verdict: {threshold: 5s, samples: 3}`)
	code, stdout, stderr := runCLI(t, context.Background(), "host", "check", "--job", ok)
	if !strings.Contains(stdout, "(host key verified)") || !strings.Contains(stdout, "ok: the job's boot parameters are in effect") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	// The preflight's verdict on this machine: ready, unless the test
	// runs as another user than root.
	if os.Geteuid() == 0 && (code != exitOK || !strings.Contains(stdout, "\nready: a run can start")) {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if os.Geteuid() != 0 && (code != exitFailure || !strings.Contains(stdout, "is not root on the host")) {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	release, _ := sshtest.RunLocal("uname", "-r")
	if !strings.Contains(stdout, "kernel:     "+strings.TrimSpace(string(release))+"\n") {
		t.Errorf("no kernel release in\n%s", stdout)
	}
	bad := sshJob(t, s, "nohz_full=1 isolcpus=1", "{}")
	code, stdout, _ = runCLI(t, context.Background(), "host", "check", "--job", bad)
	if code != exitFailure || !strings.Contains(stdout, "wrong: nohz_full=1 is not on the kernel command line\n") ||
		!strings.Contains(stdout, `wrong: /sys/devices/system/cpu/nohz_full says "", not 1: nohz_full is not in effect`) {
		t.Errorf("exit %d\n%s", code, stdout)
	}
}

func TestMeasureOverSSH(t *testing.T) {
	s := sshtest.Start(t)
	job := sshJob(t, s, "quiet", `{tool: command, cpus: 1, command: "echo Run time: $((8000 + 581))ms", pattern: 'Run time: (\d+)ms', unit: ms}
verdict: {threshold: 5s, samples: 3}`)
	code, stdout, stderr := runCLI(t, context.Background(), "measure", "--job", job)
	if code != exitOK || !strings.Contains(stderr, "measuring on "+s.User+"@127.0.0.1:") ||
		!strings.Contains(stdout, "value of the worst CPU per sample: 8.58 s, 8.58 s, 8.58 s") || !strings.Contains(stdout, "verdict: bad") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}
