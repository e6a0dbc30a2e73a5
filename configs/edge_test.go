package configs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// memFiles serves job files from memory; other names do not exist.
func memFiles(files map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if s, ok := files[name]; ok {
			return []byte(s), nil
		}
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	}
}

// okJob is a job's head: machine, but no host, boot or build sections.
const okJob = "apiVersion: kbisect/v1\nkind: Job\nmachine: {name: box, cpus: 8}\n"

// hostBuild completes okJob with the host and build sections.
const hostBuild = "host: {address: h}\nbuild: {tree: /}\n"

// loadMem loads job.yaml from files and returns every diagnostic as text.
func loadMem(t *testing.T, files map[string]string) (*Job, []string) {
	t.Helper()
	job, err := Load("job.yaml", LoadOptions{Home: "/h", LookupEnv: testEnv, ReadFile: memFiles(files)})
	var ce *Errors
	switch {
	case errors.As(err, &ce):
		return nil, strs(ce.All)
	case err != nil:
		t.Fatalf("Load: %T %v", err, err)
	}
	return job, strs(job.Warnings)
}

func wantDiags(t *testing.T, got []string, want ...string) {
	t.Helper()
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || strings.Contains(g, w)
		}
		if !found {
			t.Errorf("no diagnostic contains %q; got:\n\t%s", w, strings.Join(got, "\n\t"))
		}
	}
}

func noDiag(t *testing.T, got []string, not ...string) {
	t.Helper()
	for _, g := range got {
		for _, n := range not {
			if strings.Contains(g, n) {
				t.Errorf("unwanted diagnostic %q", g)
			}
		}
	}
}

func TestAliasesThatContainThemselvesAreRefused(t *testing.T) {
	_, got := loadMem(t, map[string]string{"job.yaml": okJob + "x-r: &r {x-r: *r}\n"})
	wantDiags(t, got, "job.yaml:4:15: *r refers to a mapping or list that contains it")
	_, got = loadMem(t, map[string]string{
		"job.yaml": okJob + "include: [d.yaml, d.yaml]\n",
		"d.yaml":   "apiVersion: kbisect/v1\nkind: Defaults\nx-r: &r {x-r: *r}\n",
	})
	wantDiags(t, got, "d.yaml:3:15: *r refers to a mapping or list that contains it")
	_, got = loadMem(t, map[string]string{"job.yaml": okJob + "boot: &b {<<: *b, method: kexec}\n"})
	wantDiags(t, got, "*b refers to a mapping or list that contains it")
}

func TestDevicesAndFIFOsAreNotRead(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	job := filepath.Join(dir, "job.yaml")
	text := okJob + "include: [/dev/zero, fifo.yaml]\nhost: {address: h}\nboot: {method: kexec, params: nohz_full=1}\nbuild: {tree: /, fragments: [/dev/zero]}\n"
	if err := os.WriteFile(job, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(job, LoadOptions{Home: "/h"})
	if err == nil {
		t.Fatal("loaded")
	}
	for _, want := range []string{"cannot read /dev/zero: not a regular file", "cannot read " + fifo + ": not a regular file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestAnUnreadableIncludeHidesOnlyWhatItWouldSet(t *testing.T) {
	_, got := loadMem(t, map[string]string{"job.yaml": `apiVersion: kbisect/v1
kind: Job
include: [nope.yaml, lab.yaml, ""]
machine: {name: box, cpus: 8}
host: {port: 70000}
boot: {method: kexc, timeout: 1s}
verdict: {confidence: 7}
`, "lab.yaml": "apiVersion: kbisect/v1\nkind: Defaults\nbuild: {tree: /}\n"})
	wantDiags(t, got,
		"job.yaml:3:11: include: cannot read nope.yaml: file does not exist",
		"job.yaml:3:32: include: empty file name",
		"host.port: 70000 is not between 1 and 65535",
		`boot.method: "kexc" is not one of kexec, grub, script, qemu; did you mean "kexec"?`,
		"boot.timeout: 1s is not between 30s and 6h",
		"verdict.confidence: 7 is not between 0.5 and 1")
	noDiag(t, got, "missing", "build.tree") // host.address may be in nope.yaml; lab.yaml was read
}

func TestAMisplacedKeyDoesNotHideTheRightOne(t *testing.T) {
	_, got := loadMem(t, map[string]string{"job.yaml": okJob + hostBuild + "boot: {method: kexec, params: nohz_full=1 rcu_nocbs=99}\nworkload: {params: x}\n"})
	wantDiags(t, got, "workload.params: unknown key here; did you mean boot.params?", "boot.params: rcu_nocbs: CPU 99 is outside the machine")
}

func TestAKeyThatFailsToDecodeGetsNoDefaultAndNoFollowOnErrors(t *testing.T) {
	_, got := loadMem(t, map[string]string{"job.yaml": okJob + hostBuild + "boot: {method: kexec, power_cycle: p, params: nohz_full=1}\nworkload: {tool: [command], command: ./b, pattern: '(\\d+)'}\nverdict: {metric: value}\n"})
	var errs []string
	for _, g := range got {
		if !strings.Contains(g, "warning:") {
			errs = append(errs, g)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "workload.tool: expected text, got a list") {
		t.Errorf("want only the tool's error, got:\n\t%s", strings.Join(errs, "\n\t"))
	}
}

func TestCPUListsDoNotDependOnKeyOrder(t *testing.T) {
	_, got := loadMem(t, map[string]string{"job.yaml": "apiVersion: kbisect/v1\nkind: Job\nworkload: {cpus: 5-N}\nmachine: {numa_nodes: [0-3, 4-11], cpus: 8, name: box}\nhost: {address: h}\nbuild: {tree: /}\nboot: {method: kexec, params: nohz_full=5-7}\n"})
	wantDiags(t, got, "job.yaml:4:29: machine.numa_nodes[1]: CPU 11 is outside the machine (machine.cpus: 8, CPUs 0-7)")
	noDiag(t, got, "workload.cpus")
	job, got := loadMem(t, map[string]string{"job.yaml": "apiVersion: kbisect/v1\nkind: Job\nmachine: {name: vm}\nbuild: {tree: /}\nboot: {method: qemu, params: nohz_full=1, qemu: {cpus: 2}}\nworkload: {cpus: N}\n"})
	if job == nil || job.Workload.CPUs.String() != "1" {
		t.Errorf("qemu guest: workload.cpus N = %v; %v", job, got)
	}
}

func TestIsolationIsCheckedForDefaultedCPUs(t *testing.T) {
	_, got := loadMem(t, map[string]string{"job.yaml": okJob + hostBuild + "boot: {method: kexec, power_cycle: p, params: nohz_full=1-3 isolcpus=1-3 irqaffinity=0-7 kthread_cpus=0-7 rcu_nocbs=0}\n"})
	wantDiags(t, got, "workload.cpus: measured CPUs are not fully isolated: irqaffinity sends interrupts to CPUs 1-3; kthread_cpus runs kernel threads on CPUs 1-3")
	noDiag(t, got, "RCU callbacks") // nohz_full CPUs are offloaded anyway
}

func TestANullKeyKeepsTheIncludedValue(t *testing.T) {
	job, got := loadMem(t, map[string]string{
		"job.yaml": okJob + hostBuild + "include: d.yaml\nboot:\n  power_cycle:\nworkload:\n",
		"d.yaml":   "apiVersion: kbisect/v1\nkind: Defaults\nboot: {method: kexec, params: nohz_full=1, power_cycle: pdu 3}\nworkload: {load: stress-ng}\n",
	})
	if job == nil || job.Boot.PowerCycle != "pdu 3" || job.Workload.Load != "stress-ng" {
		t.Fatalf("included values lost: %+v %v", job, got)
	}
}

func TestFilesNamedByMistakeAreNotEchoed(t *testing.T) {
	_, got := loadMem(t, map[string]string{
		"job.yaml":   okJob + hostBuild + "include: secret.env\nboot: {method: kexec, params: nohz_full=1}\n",
		"secret.env": "BMC_PASSWORD=hunter2\n",
	})
	wantDiags(t, got, "secret.env:1:1: expected a mapping of keys")
	noDiag(t, got, "hunter2")

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret.env"), []byte("BMC_PASSWORD=hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	jobFile := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(jobFile, []byte(okJob+"host: {address: h}\nboot: {method: kexec, params: nohz_full=1}\nbuild: {tree: /, fragments: [secret.env]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(jobFile, LoadOptions{Home: "/h"})
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "secret.env:1:1: not a config option") {
		t.Errorf("got %v", err)
	}
}

func TestBootParamsAsTheKernelReadsThem(t *testing.T) {
	_, got := loadMem(t, map[string]string{"job.yaml": okJob + hostBuild + "boot: {method: kexec, power_cycle: p, params: 'nohz-full=1-3 nohz_full=4 isolcpus=nohz,domain,2-3'}\n"})
	wantDiags(t, got,
		"boot.params: nohz_full is given twice: the kernel keeps the first and refuses a second that differs",
		`boot.params: nohz_full (1-3) and isolcpus=nohz (2-3) differ: the kernel refuses the second`)
	_, got = loadMem(t, map[string]string{"job.yaml": okJob + hostBuild + "boot: {method: kexec, params: isolcpus=all}\nworkload: {cpus: 1}\n"})
	wantDiags(t, got, `job.yaml:6:40: boot.params: isolcpus: unknown flag "all"`)
	_, got = loadMem(t, map[string]string{"job.yaml": okJob + hostBuild + "boot: {method: kexec, params: 'nohz_full=\"1-9\"'}\n"})
	wantDiags(t, got, "boot.params: nohz_full: CPU 9 is outside the machine")
}

func TestOddYAMLGetsPlainAnswers(t *testing.T) {
	for src, want := range map[string]string{
		okJob + "boot:\n  method: *nope\n":                                                                  "job.yaml:5: YAML syntax: unknown anchor 'nope' referenced",
		"x-v: &v kbisect/v1\napiVersion: *v\nkind: Job\nmachine: {name: b}\n":                               "",
		okJob + "host: {port: 99999999999999999999}\n":                                                      "host.port: 99999999999999999999 is out of range",
		okJob + hostBuild + "boot:\n  method: kexec # a\ttab\n  params: nohz_full=1\n  script: echo a\tb\n": "boot.script: only boot.method script runs a script",
		"apiVersion: kbisect/v1\nkind: Job\nmachine: {name: 2024-01-01}\n":                                  "",
	} {
		_, got := loadMem(t, map[string]string{"job.yaml": src})
		if want == "" {
			noDiag(t, got, "apiVersion", "machine.name: expected")
			continue
		}
		wantDiags(t, got, want)
		noDiag(t, got, "a tab in the indentation")
	}
}

func TestExplicitZerosAreKeptAndChecked(t *testing.T) {
	job, got := loadMem(t, map[string]string{"job.yaml": okJob + "build: {tree: /}\nboot: {method: kexec, power_cycle: p, params: nohz_full=1, settle: 0s}\nhost: {address: h, keepalive: 0s}\n"})
	if job == nil || job.Boot.Settle != 0 || job.Host.Keepalive != 0 {
		t.Fatalf("zeros replaced: %+v %v", job, got)
	}
	out, _ := job.Effective()
	for _, want := range []string{"  settle: 0s\n", "  keepalive: 0s\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("config show lacks %q", want)
		}
	}
	_, got = loadMem(t, map[string]string{"job.yaml": okJob + "build: {tree: /}\nhost: {address: h, port: 0}\nverdict: {boots: 0}\nboot: {method: kexec, params: nohz_full=1}\n"})
	wantDiags(t, got, "host.port: 0 is not between 1 and 65535", "verdict.boots: 0 is not between 1 and 100")
}

func TestTracerTimesAreWholeMicroseconds(t *testing.T) {
	_, got := loadMem(t, map[string]string{"job.yaml": okJob + hostBuild + "boot: {method: kexec, params: nohz_full=1}\nworkload: {noise_threshold: 500ns, runtime: 2s, period: 2500500ns}\n"})
	wantDiags(t, got, "workload.noise_threshold: 500ns is not between 1us and 1s", "workload.period: 2500.5us is not a whole number of microseconds")
	_, got = loadMem(t, map[string]string{"job.yaml": okJob + hostBuild + "boot: {method: kexec, params: nohz_full=1}\nworkload: {runtime: 2s}\n"})
	wantDiags(t, got, "workload.runtime: 2s is longer than the tracer's default period of 1s; set workload.period too")
}
