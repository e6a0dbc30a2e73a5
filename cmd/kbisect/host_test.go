package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"kbisect/internal/sshtest"
)

// sshJob is a job file whose host is the test sshd.
func sshJob(t *testing.T, s *sshtest.Server, params, workload string) string {
	t.Helper()
	return jobFile(t, fmt.Sprintf(`apiVersion: kbisect/v1
kind: Job
machine: {name: box, cpus: 2}
host: {address: 127.0.0.1, port: %d, user: %s, identity: %s, known_hosts: %s}
boot: {method: kexec, power_cycle: pdu 1, params: %q}
build: {tree: /}
workload: %s
`, s.Port, s.User, s.Identity, s.KnownHosts, params, workload))
}

func TestHostCheckSaysWhatRunsAndWhatIsWrong(t *testing.T) {
	s := sshtest.Start(t)
	// This machine was booted with "quiet": a job asking only for that
	// finds it in effect.
	ok := sshJob(t, s, "quiet", "{cpus: 1}")
	code, stdout, stderr := runCLI(t, context.Background(), "host", "check", "--job", ok)
	if code != exitOK || !strings.Contains(stdout, "(host key verified)") || !strings.Contains(stdout, "ok: the job's boot parameters are in effect") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
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
