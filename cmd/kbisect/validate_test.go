package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// jobFile writes a job file into a temp dir and returns its path.
func jobFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const typoJob = `apiVersion: kbisect/v1
kind: Job
machine: {name: box, cpus: 4}
host:
  adress: 192.0.2.10
boot: {method: kexec, params: nohz_full=1-5, power_cycle: pdu 3}
build: {tree: /tmp}
`

func TestValidateShippedJobFilesAreOK(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("configs: %v %v", files, err)
	}
	code, stdout, stderr := runCLI(t, context.Background(), append([]string{"validate"}, files...)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, f := range files {
		if !strings.Contains(stdout, f+": ok") {
			t.Errorf("no %q in:\n%s", f+": ok", stdout)
		}
	}
}

func TestValidateListsEveryErrorWithItsPlace(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // no ~/src/linux, no known_hosts
	bad := jobFile(t, typoJob)
	good, _ := filepath.Abs("../../configs/qemu-local.yaml")
	code, stdout, _ := runCLI(t, context.Background(), "validate", good, bad)
	if code != exitUsage {
		t.Fatalf("exit %d, want %d\n%s", code, exitUsage, stdout)
	}
	for _, want := range []string{
		good + ": ok (1 warning)",
		bad + `:5:3: host.adress: unknown key; did you mean "address"?`,
		bad + ":6:41: boot.params: nohz_full: CPU 5 is outside the machine (machine.cpus: 4, CPUs 0-3)",
		bad + ": 2 errors",
	} {
		if !strings.Contains(stdout, want+"\n") {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

func TestValidateJSON(t *testing.T) {
	bad := jobFile(t, typoJob)
	code, stdout, _ := runCLI(t, context.Background(), "validate", "--json", bad)
	if code != exitUsage {
		t.Fatalf("exit %d", code)
	}
	var out struct {
		OK    bool
		Files []struct {
			File   string
			OK     bool
			Errors []struct {
				File      string
				Line, Col int
				Key       string
				Message   string
			}
		}
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if out.OK || len(out.Files) != 1 || out.Files[0].OK || len(out.Files[0].Errors) != 2 {
		t.Fatalf("%+v", out)
	}
	e := out.Files[0].Errors[0]
	if e.File != bad || e.Line != 5 || e.Col != 3 || e.Key != "host.adress" || e.Message != `unknown key; did you mean "address"?` {
		t.Errorf("first error %+v", e)
	}
}

func TestValidateNeedsAFile(t *testing.T) {
	code, _, stderr := runCLI(t, context.Background(), "validate")
	if code != exitUsage || !strings.Contains(stderr, "name at least one job file") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func TestConfigShowKeepsSecretsNames(t *testing.T) {
	t.Setenv("BMC_PASSWORD", "hunter2")
	code, stdout, stderr := runCLI(t, context.Background(), "config", "show", "../../configs/system-0.yaml")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(stdout+stderr, "hunter2") {
		t.Fatalf("the secret's value was printed:\n%s", stdout)
	}
	for _, want := range []string{
		`IPMI_PASSWORD="${BMC_PASSWORD}" ipmitool`,
		"# ${BMC_PASSWORD} from the environment",
		"  method: kexec # from lab-defaults.yaml\n",
		"  cpus: 1-16,33-48 # default\n",
		"  threshold: 1ms\n",
		"    min: 3 # default; a bisection's boot starts with 1 where calibration finds one sample decisive\n",
		"    max: 20 # from lab-defaults.yaml\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("config show lacks %q:\n%s", want, stdout)
		}
	}
}

func TestRunJobChecksTheJobFileFirst(t *testing.T) {
	bad := jobFile(t, typoJob)
	code, _, stderr := runCLI(t, context.Background(), "run", "--job", bad, "--good", "a", "--bad", "b")
	if code != exitUsage || !strings.Contains(stderr, `host.adress: unknown key; did you mean "address"?`) ||
		!strings.Contains(stderr, "2 errors in the job file") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}

	t.Setenv("BMC_PASSWORD", "")
	os.Unsetenv("BMC_PASSWORD")
	code, _, stderr = runCLI(t, context.Background(), "run", "--job", "../../configs/system-0.yaml", "--good", "a", "--bad", "b")
	if code != exitUsage || !strings.Contains(stderr, "boot.power_cycle: environment variable BMC_PASSWORD is not set") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}

	t.Setenv("BMC_PASSWORD", "hunter2")
	code, _, stderr = runCLI(t, context.Background(), "run", "--job", "../../configs/system-0.yaml", "--good", "a", "--bad", "b")
	if code != exitUsage || !strings.Contains(stderr, "kbisect: build.tree /root/src/linux-stable-rt: ") || strings.Contains(stderr, "hunter2") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}
