package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/internal/simlab"
)

func simLab(t *testing.T, opt simlab.Options) *simlab.Lab {
	t.Helper()
	l, err := simlab.New(t.TempDir(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestRunJobFindsThePlantedRegressionOnTheSimulatedLab is the mission's
// main job end to end on the simulated lab: calibration, the bisection
// through build, boot and measure, the confirmation, the report; then a
// second run of the same command answers from the state directory, and
// kbisect report renders the same.
func TestRunJobFindsThePlantedRegressionOnTheSimulatedLab(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 3, Commits: 120})
	state := filepath.Join(t.TempDir(), "state")
	args := []string{"run", "--job", l.JobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", state}
	code, stdout, stderr := runCLI(t, context.Background(), args...)
	want := l.Tree.Expected.FirstBad
	if code != exitOK || !strings.HasPrefix(stdout, want+" is the first bad commit\n") {
		t.Fatalf("exit %d, want %s\nstdout:\n%s\nstderr:\n%s", code, want, stdout, stderr)
	}
	for _, s := range []string{"Confirmed on fresh boots: first bad ", "Tested kernels, oldest first (noise, median [range]):",
		"bad (endpoint)", "good (endpoint)", "last good ", "first bad " + want[:12], "calibrating on the endpoints"} {
		if !strings.Contains(stdout+stderr, s) {
			t.Errorf("the output lacks %q:\n%s\n%s", s, stdout, stderr)
		}
	}

	// Again: everything comes from the state directory.
	code, again, stderr := runCLI(t, context.Background(), append(args, "--json")...)
	var out runJSON
	if err := json.Unmarshal([]byte(again), &out); err != nil || code != exitOK {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, again, stderr)
	}
	if out.Result != "found" || out.FirstBad != want || out.Confirmed == nil || !*out.Confirmed || !strings.Contains(stderr, "resuming from") {
		t.Errorf("second run: %+v\n%s", out, stderr)
	}
	for _, tc := range out.Tested {
		if tc.Metric == nil || (tc.Verdict != "skip" && len(tc.Metric.Values) == 0) {
			t.Errorf("tested %s %s without its numbers: %+v", tc.Commit, tc.Verdict, tc.Metric)
		}
	}

	code, report, _ := runCLI(t, context.Background(), "report", "--state", state)
	if code != exitOK || !strings.HasPrefix(report, want+" is the first bad commit\n") || !strings.Contains(report, "Tested kernels") {
		t.Errorf("report: exit %d\n%s", code, report)
	}
	code, md, _ := runCLI(t, context.Background(), "report", "--state", state, "--format", "markdown")
	if code != exitOK || !strings.HasPrefix(md, "**First bad commit:** `"+want+"`") || !strings.Contains(md, "| commit | verdict |") {
		t.Errorf("markdown report: exit %d\n%s", code, md)
	}
}

// TestRunJobStopsWhenTheEndpointsDoNotReproduce: two good kernels as the
// endpoints are not a regression to bisect: exit 4 with both kernels'
// numbers, nothing bisected.
func TestRunJobStopsWhenTheEndpointsDoNotReproduce(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 4, Commits: 80})
	code, stdout, stderr := runCLI(t, context.Background(), "run", "--job", l.JobFile, "--good", l.Tree.Good, "--bad", l.Tree.Commits[0],
		"--state", filepath.Join(t.TempDir(), "state"))
	if code != exitNotReproduced || !strings.Contains(stdout, "not reproduced: the bad endpoint ") || !strings.Contains(stdout, " is not bad: median ") ||
		!strings.Contains(stdout, "good endpoint ") || strings.Contains(stderr, "Bisecting:") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
