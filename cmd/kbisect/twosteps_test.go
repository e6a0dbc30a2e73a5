package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kbisect/internal/simlab"
	"kbisect/internal/simnoise"
	"kbisect/report"
)

// TestRunJobNamesTheFirstOfTwoSteps: the simulated lab's regression in
// two steps, 7 µs to 9 µs at the planted commit and on to 15 µs at a
// later one. The search converges on the later step first (the commits
// between the steps sit nearer the good side), finds its parent worse
// than the good endpoint, searches again below that parent, and names
// the planted commit, the later step listed in the report's text and in
// the JSON's posterior (git bisect run with a threshold between the endpoints names
// the later step: internal/simlab's TestARegressionInTwoSteps).
func TestRunJobNamesTheFirstOfTwoSteps(t *testing.T) {
	longUnderRace(t)
	noise, err := simnoise.Parse("spread=0.1,boot-spread=0.03")
	if err != nil {
		t.Fatal(err)
	}
	l := simLab(t, simlab.Options{Seed: 14, Commits: 120, GoodNoise: 70 * time.Microsecond, FirstStep: 95 * time.Microsecond, BadNoise: 150 * time.Microsecond,
		NoStorm: true, BrokenBuilds: -1, Noise: noise})
	state := filepath.Join(t.TempDir(), "state")
	code, stdout, stderr := runCLI(t, context.Background(), "run", "--job", l.JobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", state, "--json")
	var out report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitOK {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	if out.Result != "found" || out.FirstBad != l.Tree.Regression {
		t.Fatalf("%s %s, want %s (the later step is %s)\n%s", out.Result, out.FirstBad, l.Tree.Regression, l.Tree.Later, stdout)
	}
	if out.Posterior == nil || len(out.Posterior.Later) != 1 || out.Posterior.Later[0] != l.Tree.Later {
		t.Errorf("posterior %+v: want the later step %s listed", out.Posterior, l.Tree.Later)
	}
	if !strings.Contains(out.Reason, "the first of two steps: the search first converged on a later step, whose parent measured") {
		t.Errorf("reason %q", out.Reason)
	}
	t.Logf("%d boots, %d of the endpoints: %s", out.Posterior.Boots, out.Posterior.CalibrationBoots, out.Reason)
	code, text, stderr := runCLI(t, context.Background(), "report", "--state", state)
	later := "It is the first of two steps: " + l.Tree.Later[:12] + " made it worse again later (the search converged on that one first, found its parent worse than the good endpoint, and searched again below it)."
	if code != exitOK || !strings.Contains(strings.Join(strings.Fields(text), " "), later) || !strings.Contains(text, l.Tree.Regression[:12]+" is the first bad commit") {
		t.Errorf("report: exit %d\n%s\n%s", code, text, stderr)
	}
}
