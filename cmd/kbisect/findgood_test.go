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

// TestRunJobWalksBackWhenTheGoodEndpointIsBad is the first seed's case
// on the simulated lab: the regression is three releases below the good
// tag the user gives, so that tag measures bad. Without --find-good the
// run stops as not reproduced (exit 4) and says how to go on; with it,
// the releases below are measured, newest first with growing steps
// (v6.12.56 bad, v6.12.54 good), the bisection runs between the good one
// and the oldest bad one, and names the planted commit; the report and
// the JSON say that the given good endpoint was bad and what the walk
// cost.
func TestRunJobWalksBackWhenTheGoodEndpointIsBad(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 21, Commits: 200, OlderReleases: 6, RegressionBack: 3, BrokenBuilds: -1})
	searchByRule(t, l.JobFile)
	state := filepath.Join(t.TempDir(), "state")
	args := []string{"run", "--job", l.JobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", state}

	code, stdout, stderr := runCLI(t, context.Background(), args...)
	if code != exitNotReproduced || !strings.Contains(stdout, "is bad too") || !strings.Contains(stdout, "--find-good") || strings.Contains(stderr, "walking back") {
		t.Fatalf("without --find-good: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	code, stdout, stderr = runCLI(t, context.Background(), append(args, "--find-good", "--json")...)
	var out report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitOK {
		t.Fatalf("with --find-good: exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	want := l.Tree.Regression
	if out.Result != "found" || out.FirstBad != want {
		t.Fatalf("found %s %s, want %s\n%s", out.Result, out.FirstBad, want, stderr)
	}
	fg := out.FindGood
	if fg == nil {
		t.Fatalf("no find_good in the JSON:\n%s", stdout)
	}
	var walked []string
	for _, try := range fg.Tried {
		walked = append(walked, try.Tag+" "+string(try.Verdict))
	}
	// v6.12.55 and up carry the regression, v6.12.54 does not.
	if got, want := strings.Join(walked, ", "), "v6.12.56 bad, v6.12.54 good"; got != want {
		t.Errorf("walked %q, want %q", got, want)
	}
	if fg.Given != l.Tree.GoodCommit || fg.From != "v6.12.57" || fg.Found != "v6.12.54" || fg.Kernels != 2 ||
		fg.Good != tagCommit(t, l.Tree.Dir, "v6.12.54") || fg.Bad != tagCommit(t, l.Tree.Dir, "v6.12.56") {
		t.Errorf("find_good %+v", fg)
	}
	// The bisection ran below the given good endpoint: every commit it
	// tested is between v6.12.54 and v6.12.56.
	for _, tc := range out.Tested {
		if isAnc(t, l.Tree.Dir, tc.Commit, "v6.12.54") || !isAnc(t, l.Tree.Dir, tc.Commit, "v6.12.56") {
			t.Errorf("tested %s, outside v6.12.54..v6.12.56", tc.Commit)
		}
	}
	if !strings.Contains(stderr, "walking back along the releases below v6.12.57") || !strings.Contains(stderr, "v6.12.54 good:") {
		t.Errorf("the progress does not show the walk:\n%s", stderr)
	}
	log, err := os.ReadFile(filepath.Join(state, "git-bisect.log"))
	if err != nil || strings.Count(string(log), "git bisect start") != 2 {
		t.Errorf("git-bisect.log restarts once on the range found: %v\n%s", err, log)
	}

	// The text report says it in words, and a resumed run measures
	// nothing again.
	code, text, stderr := runCLI(t, context.Background(), append(args, "--find-good")...)
	text = strings.Join(strings.Fields(text), " ") // unwrapped
	if code != exitOK || !strings.Contains(text, "The good endpoint v6.12.57 measured bad") ||
		!strings.Contains(text, "cost 2 kernels (v6.12.56 bad, v6.12.54 good)") ||
		!strings.Contains(text, "the bisection ran from v6.12.54 (good) to v6.12.56 (bad)") || !strings.Contains(text, "bad+") ||
		!strings.Contains(text, "--find-good") {
		t.Errorf("the text report: exit %d\n%s\n%s", code, text, stderr)
	}
	if strings.Contains(stderr, " boot\n") || strings.Contains(stderr, "walking back") {
		t.Errorf("the resumed run measured again:\n%s", stderr)
	}
}

// TestRunJobWalkBackGivesUpAtItsLimit: when no release within
// find_good.max_kernels measures good, the run is not reproduced, and
// says what it measured.
func TestRunJobWalkBackGivesUpAtItsLimit(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 22, Commits: 200, OlderReleases: 6, RegressionBack: 6, BrokenBuilds: -1})
	searchByRule(t, l.JobFile)
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
// endpoints measure alike, which the rule cannot blame on either; the walk
// finds the release against which the bad endpoint is bad, and the
// bisection from there names the planted commit.
func TestRunJobWalksBackWithAnAutoThreshold(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 21, Commits: 200, OlderReleases: 6, RegressionBack: 3, BrokenBuilds: -1})
	searchByRule(t, l.JobFile)
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
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitNotReproduced || !strings.Contains(out.Reason, "the endpoints measure alike") {
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
