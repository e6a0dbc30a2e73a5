package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/configs"
	"kbisect/internal/simlab"
	"kbisect/internal/sshtest"
)

// rewriteJob copies a job file with one line changed.
func rewriteJob(t *testing.T, file, from, to string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), from) {
		t.Fatalf("%s has no %q", file, from)
	}
	return jobFile(t, strings.Replace(string(data), from, to, 1))
}

// assertNothingBuilt fails when a run left a state directory or touched
// the build cache: it stopped before its first build.
func assertNothingBuilt(t *testing.T, state, cache string) {
	t.Helper()
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("the failed run left its state directory %s (%v)", state, err)
	}
	for _, d := range []string{"slots", "artifacts", "logs"} {
		if _, err := os.Stat(filepath.Join(cache, d)); !os.IsNotExist(err) {
			t.Errorf("a build was started: %s exists (%v)", filepath.Join(cache, d), err)
		}
	}
}

// TestRunAgainstAnUnreachableHostNeverStartsABuild: a host that does not
// resolve or refuses SSH stops the run before its first build, at once
// (no retries), naming the host, the fix and host check, with exit 1; no
// state directory is left for a later run to resume. kbisect ab too.
func TestRunAgainstAnUnreachableHostNeverStartsABuild(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 3, Commits: 60})
	for _, tc := range []struct {
		name, from, to, says, fix string
	}{
		{"no such host", "address: 127.0.0.1", "address: system-0.lab.invalid",
			"host.address system-0.lab.invalid does not resolve (no such host)", "fix: correct host.address"},
		{"refused", fmt.Sprintf("port: %d", l.Host.Port), fmt.Sprintf("port: %d", sshtest.FreePort(t)),
			"nothing listens for SSH at 127.0.0.1:", "fix: start sshd on the host, or correct host.port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := rewriteJob(t, l.JobFile, tc.from, tc.to)
			state := filepath.Join(t.TempDir(), "state")
			code, stdout, stderr := runCLI(t, context.Background(), "run", "--job", job, "--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", state)
			if code != exitFailure || !strings.Contains(stderr, tc.says) || !strings.Contains(stderr, tc.fix) ||
				!strings.Contains(stderr, "nothing was built") || !strings.Contains(stderr, "kbisect host check --job "+job+" reproduces this") {
				t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			if strings.Contains(stderr, "retrying") || strings.Contains(stderr, "calibrating") {
				t.Errorf("the run went on past the preflight:\n%s", stderr)
			}
			assertNothingBuilt(t, state, l.CacheDir)

			code, stdout, _ = runCLI(t, context.Background(), "host", "check", "--job", job)
			if code != exitFailure || !strings.Contains(stdout, "(not reached)") || !strings.Contains(stdout, "not ready: "+tc.says) {
				t.Errorf("host check: exit %d\n%s", code, stdout)
			}

			// kbisect ab starts the same way.
			code, _, stderr = runCLI(t, context.Background(), "ab", "--job", job, "--a", l.Tree.Good, "--b", l.Tree.Bad, "--state", state)
			if code != exitFailure || !strings.Contains(stderr, tc.says) || !strings.Contains(stderr, "nothing was built") {
				t.Errorf("ab: exit %d\n%s", code, stderr)
			}
			assertNothingBuilt(t, state, l.CacheDir)
		})
	}
}

// TestRunNamesTheJobsCPUsTheHostLacks: a job written for a 64-CPU machine
// pointed at a 32-CPU one stops before any build, naming machine.cpus and
// the CPU lists the host lacks; host check says the same.
func TestRunNamesTheJobsCPUsTheHostLacks(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 3, Commits: 60})
	l.Host.SetCPUs(32)
	state := filepath.Join(t.TempDir(), "state")
	code, stdout, stderr := runCLI(t, context.Background(), "run", "--job", l.JobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", state)
	wants := []string{
		"the host has 32 CPUs (0-31), not the 64 machine.cpus says",
		"fix: set machine.cpus: 32",
		"workload.cpus names CPU 33-48, which the host does not have (it has 0-31)",
		"boot.params names CPU isolcpus 33-48, nohz_full 33-48, rcu_nocbs 33-48, irqaffinity 32,49-63, which the host does not have",
	}
	for _, want := range wants {
		if !strings.Contains(stderr, want) {
			t.Errorf("the run does not say %q: exit %d\nstdout:\n%s\nstderr:\n%s", want, code, stdout, stderr)
		}
	}
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	assertNothingBuilt(t, state, l.CacheDir)

	code, stdout, _ = runCLI(t, context.Background(), "host", "check", "--job", l.JobFile)
	for _, want := range wants {
		if !strings.Contains(stdout, want) {
			t.Errorf("host check does not say %q: exit %d\n%s", want, code, stdout)
		}
	}
}

// TestRunNamesMissingKexecOnARealHostBeforeAnyBuild: a real sshd whose
// sessions have no kexec on their PATH (as a host without kexec-tools):
// the run stops before building, naming kexec and how to install it.
func TestRunNamesMissingKexecOnARealHostBeforeAnyBuild(t *testing.T) {
	for _, p := range []string{"/usr/bin/kexec", "/bin/kexec"} {
		if _, err := os.Stat(p); err == nil {
			t.Skipf("this machine has %s on every PATH: no host without kexec-tools to test against", p)
		}
	}
	s := sshtest.Start(t, "SetEnv PATH=/usr/bin:/bin") // kexec lives in /usr/sbin
	tree, err := simlab.NewTree(filepath.Join(t.TempDir(), "tree"), simlab.Options{Seed: 3, Commits: 60})
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "cache")
	job := jobFile(t, fmt.Sprintf(`apiVersion: kbisect/v1
kind: Job
machine: {name: box, cpus: %d}
host: {address: 127.0.0.1, port: %d, user: %s, identity: %s, known_hosts: %s}
boot: {method: kexec, power_cycle: "true"}
build: {tree: %s, config: tinyconfig, cache_dir: %s}
workload: {tool: command, command: "echo 'Run time: 8ms'", pattern: 'Run time: (\d+)ms', unit: ms}
verdict: {threshold: 5s, samples: 3}
`, localCPUs(t), s.Port, s.User, s.Identity, s.KnownHosts, tree.Dir, cache))
	state := filepath.Join(t.TempDir(), "state")
	code, stdout, stderr := runCLI(t, context.Background(), "run", "--job", job, "--good", tree.Good, "--bad", tree.Bad, "--state", state)
	if code != exitFailure || !strings.Contains(stderr, "kexec is not installed on the host (boot.method kexec)") ||
		!strings.Contains(stderr, "fix: install kexec-tools on the host (Debian: apt-get install kexec-tools)") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	assertNothingBuilt(t, state, cache)
}

// localCPUs is how many CPUs this machine has, as a host reached over
// the test sshd says.
func localCPUs(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/sys/devices/system/cpu/present")
	if err != nil {
		t.Fatal(err)
	}
	cpus, err := configs.ParseCPUs(strings.TrimSpace(string(data)), 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(cpus)
}
