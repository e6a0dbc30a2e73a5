package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/bisect"
	"kbisect/internal/simlab"
	"kbisect/report"
)

// TestABRecognisesTheRevertedRegressionAndReportsItInEveryFormat: the
// bad endpoint against itself with the planted regression reverted, on
// the simulated lab: B is clean; a second run answers from the state; the
// state renders as text, markdown, json, html and junit.
func TestABRecognisesTheRevertedRegressionAndReportsItInEveryFormat(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 3, Commits: 120})
	state := filepath.Join(t.TempDir(), "ab")
	args := []string{"ab", "--job", l.JobFile, "--base", l.Tree.Bad, "--revert", l.Tree.Regression[:12], "--rounds", "4", "--samples", "2", "--state", state}
	code, stdout, stderr := runCLI(t, context.Background(), args...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"less noisy than A on all 32 CPUs", "A: " + l.Tree.Bad, "with " + l.Tree.Regression[:12] + " reverted",
		"4 rounds of 2 samples a side", "Mann-Whitney", "4 vs 4 boots", "Boot parameters: ", "nohz_full=1-16,33-48"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("ab output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Count(stdout, "CPU ") < 2 && strings.Count(stdout, "\n  1 ") < 2 {
		t.Errorf("no per-CPU tables:\n%s", stdout)
	}
	boots := len(l.Host.Boots())
	code, again, _ := runCLI(t, context.Background(), append(args, "--json")...)
	var out report.ABResultJSON
	if err := json.Unmarshal([]byte(again), &out); err != nil || code != exitOK || out.Result != "different" || out.Measured != 8 || len(l.Host.Boots()) != boots {
		t.Errorf("again: exit %d, %+v, %v, %d boots more", code, out, err, len(l.Host.Boots())-boots)
	}

	for format, want := range map[string]string{"text": "less noisy", "markdown": "| | A | B |", "json": `"result": "different"`,
		"html": `id="plot-ab-cpus"`, "junit": "<testsuites"} {
		code, got, stderr := runCLI(t, context.Background(), "report", "--state", state, "--format", format)
		if code != exitOK || !strings.Contains(got, want) {
			t.Errorf("report --format %s: exit %d, want %q\n%s\n%s", format, code, want, got, stderr)
		}
	}
	html := filepath.Join(t.TempDir(), "ab.html")
	if code, _, stderr := runCLI(t, context.Background(), "report", "--state", state, "--format", "html", "-o", html); code != exitOK {
		t.Fatalf("report -o: %s", stderr)
	}
	if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), "plot-ab-samples") || strings.Contains(string(b), "<script src") {
		t.Errorf("html file: %v", err)
	}
}

// TestABOfAKernelWithItselfIsNoDifference and a revert that does not
// apply is a clear usage error.
func TestABOfAKernelWithItselfIsNoDifference(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 4, Commits: 120})
	code, stdout, stderr := runCLI(t, context.Background(), "ab", "--job", l.JobFile, "--a", l.Tree.Good, "--b", l.Tree.Good,
		"--rounds", "4", "--samples", "2", "--state", filepath.Join(t.TempDir(), "ab"))
	if code != exitOK || !strings.HasPrefix(stdout, "no significant difference") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, _, stderr = runCLI(t, context.Background(), "ab", "--job", l.JobFile, "--base", l.Tree.Good, "--revert", l.Tree.Regression)
	if code != exitUsage || !strings.Contains(stderr, "does not apply") {
		t.Errorf("reverting a commit that is not in the base: exit %d: %s", code, stderr)
	}
	code, _, stderr = runCLI(t, context.Background(), "ab", "--job", l.JobFile, "--a", l.Tree.Good)
	if code != exitUsage || !strings.Contains(stderr, "give --a REV and --b REV") {
		t.Errorf("one side: exit %d: %s", code, stderr)
	}
}

// TestABResumesAfterKill9: kbisect ab killed in its third round's samples
// goes on with the same command; the two rounds it finished are not
// measured again, and the answer is the same.
func TestABResumesAfterKill9(t *testing.T) {
	bin := buildKbisect(t)
	l := simLab(t, simlab.Options{Seed: 5, Commits: 80})
	state := filepath.Join(t.TempDir(), "ab")
	args := []string{"ab", "--job", l.JobFile, "--base", l.Tree.Bad, "--revert", l.Tree.Regression, "--rounds", "4", "--samples", "2", "--state", state}
	killAt(t, bin, args, "sample 1:", 5) // round 3, side A
	kept, err := filepath.Glob(filepath.Join(state, "ab", "round-*.json"))
	if err != nil || len(kept) != 4 {
		t.Fatalf("kept before the kill: %v, %v", kept, err)
	}
	boots := len(l.Host.Boots())
	// One comparison per state directory at a time.
	unlock, err := bisect.LockState(state)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, context.Background(), args...); code != exitFailure || !strings.Contains(stderr, "state directory "+state+" is in use by another kbisect run") {
		t.Errorf("a second ab on a state in use: exit %d\n%s", code, stderr)
	}
	unlock()
	code, out, stderr := runCLI(t, context.Background(), append(args, "--json")...)
	var res report.ABResultJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitOK || res.Result != "different" || res.Measured != 8 {
		t.Fatalf("resumed: exit %d, %+v, %v\n%s", code, res, err, stderr)
	}
	if n := len(l.Host.Boots()) - boots; n != 4 {
		t.Errorf("the resumed comparison booted %d times for the 4 rounds left", n)
	}
}
