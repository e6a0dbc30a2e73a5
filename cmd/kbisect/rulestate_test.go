package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/internal/simlab"
	"kbisect/report"
)

// ruleStateMadeIn is where the fixture's lab was when kbisect made it:
// its job.yaml names the tree and the host there.
const ruleStateMadeIn = "/tmp/TestZZMakeRuleFixture935759180/001/"

// TestARuleRunsStateStillReports: a state directory an older kbisect's
// rule search made (testdata/rule-state.tgz: kbisect 724d8e7, run --job
// with verdict.search: rule on the simulated lab's seed 7, 60 commits;
// its result, session, calibration, confirmation and each commit's
// evidence, the raw outputs and build logs left out) still reports: the
// answer, the steps and the confirmation, in text and JSON. run --job
// refuses the job it was made with.
func TestARuleRunsStateStillReports(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 7, Commits: 60})
	state := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	fixture, err := filepath.Abs(filepath.Join("testdata", "rule-state.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "xzf", fixture, "-C", state).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	jobFile := filepath.Join(state, "job.yaml")
	job, err := os.ReadFile(jobFile)
	if err != nil {
		t.Fatal(err)
	}
	moved := strings.ReplaceAll(string(job), ruleStateMadeIn, filepath.Dir(l.Tree.Dir)+"/")
	if err := os.WriteFile(jobFile, []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	want := l.Tree.Expected.FirstBad
	code, text, stderr := runCLI(t, context.Background(), "report", "--state", state)
	if code != exitOK || !strings.HasPrefix(text, want+" is the first bad commit") || !strings.Contains(text, "Confirmed on fresh boots") ||
		!strings.Contains(text, "Tested kernels, oldest first") || !strings.Contains(text, "eventpoll: Replace rwlock with spinlock") {
		t.Fatalf("report: exit %d, want %s first\n%s\n%s", code, want, text, stderr)
	}
	code, stdout, stderr := runCLI(t, context.Background(), "report", "--state", state, "--format", "json")
	var out report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitOK || out.Result != "found" || out.FirstBad != want || len(out.Tested) == 0 {
		t.Fatalf("report --format json: exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
}
