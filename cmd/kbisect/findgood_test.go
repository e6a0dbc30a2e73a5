package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"kbisect/internal/simlab"
	"kbisect/report"
)

// TestRunJobWalkBackGivesUpAtItsLimit: when no release within
// find_good.max_kernels measures good, the run is not reproduced, and
// says what it measured.
func TestRunJobWalkBackGivesUpAtItsLimit(t *testing.T) {
	longUnderRace(t)
	l := simLab(t, simlab.Options{Seed: 22, Commits: 200, OlderReleases: 6, RegressionBack: 6, BrokenBuilds: -1})
	job, err := os.ReadFile(l.JobFile)
	if err != nil {
		t.Fatal(err)
	}
	jobFile := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(jobFile, append(job, []byte("\nfind_good:\n  enabled: true\n  max_kernels: 2\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, context.Background(), "run", "--job", jobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad,
		"--state", filepath.Join(t.TempDir(), "state"), "--json")
	var out report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitNotReproduced {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	if out.FindGood == nil || out.FindGood.Kernels != 2 || out.FindGood.Found != "" || len(out.FindGood.Tried) != 2 ||
		!strings.Contains(out.Reason, "no release measured good in 2 kernels (find_good.max_kernels)") {
		t.Errorf("result %q, find_good %+v", out.Reason, out.FindGood)
	}

	// kbisect report says so after the walk; during it (no walk in the
	// calibration yet, no result), the run is in progress, not over.
	state := out.StateDir
	report := func() string {
		t.Helper()
		code, stdout, stderr := runCLI(t, context.Background(), "report", "--state", state, "--format", "json")
		var rep report.RunJSON
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != exitOK {
			t.Fatalf("report: exit %d: %v\n%s\n%s", code, err, stdout, stderr)
		}
		return rep.Result
	}
	if got := report(); got != "not-reproduced" {
		t.Errorf("after the walk, report says %s", got)
	}
	calFile := filepath.Join(state, "calibration.json")
	data, err := os.ReadFile(calFile)
	if err != nil {
		t.Fatal(err)
	}
	var cal map[string]any
	if err := json.Unmarshal(data, &cal); err != nil {
		t.Fatal(err)
	}
	delete(cal, "search")
	data, _ = json.Marshal(cal)
	if err := os.WriteFile(calFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(state, "result.json")); err != nil {
		t.Fatal(err)
	}
	if got := report(); got != "in-progress" {
		t.Errorf("during the walk, report says %s", got)
	}
}

func tagCommit(t *testing.T, dir, rev string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", dir, "rev-parse", rev+"^{commit}").Output()
	if err != nil {
		t.Fatalf("git rev-parse %s: %v", rev, err)
	}
	return strings.TrimSpace(string(out))
}

// isAnc says whether a is an ancestor of b (or b), as git says.
func isAnc(t *testing.T, dir, a, b string) bool {
	t.Helper()
	err := exec.Command("git", "-C", dir, "merge-base", "--is-ancestor", a, b).Run()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		return false
	}
	if err != nil {
		t.Fatalf("git merge-base --is-ancestor %s %s: %v", a, b, err)
	}
	return true
}

// TestRunJobWalksBackWithAnAutoThreshold: with verdict.threshold auto the
// endpoints measure alike, which cannot be blamed on either; the walk
// finds the release that measures apart from the bad endpoint, and the
// search from there names the planted commit.
func TestRunJobWalksBackWithAnAutoThreshold(t *testing.T) {
	longUnderRace(t)
	l := simLab(t, simlab.Options{Seed: 21, Commits: 200, OlderReleases: 6, RegressionBack: 3, BrokenBuilds: -1})
	job, err := os.ReadFile(l.JobFile)
	if err != nil {
		t.Fatal(err)
	}
	auto := regexp.MustCompile(`(?m)^(\s+threshold:) \S+`).ReplaceAll(job, []byte("$1 auto"))
	if string(auto) == string(job) {
		t.Fatalf("no threshold in the job:\n%s", job)
	}
	jobFile := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(jobFile, auto, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--job", jobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", filepath.Join(t.TempDir(), "state"), "--json"}
	code, stdout, stderr := runCLI(t, context.Background(), args...)
	var out report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitNotReproduced || !strings.Contains(out.Reason, "--find-good") {
		t.Fatalf("without --find-good: exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, context.Background(), append(args, "--find-good")...)
	out = report.RunJSON{}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitOK {
		t.Fatalf("with --find-good: exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	if out.FirstBad != l.Tree.Regression || out.FindGood == nil || out.FindGood.Found != "v6.12.54" || out.FindGood.Kernels != 2 {
		t.Errorf("first bad %s (want %s), find_good %+v", out.FirstBad, l.Tree.Regression, out.FindGood)
	}
}
