package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/report"
)

// flakyScript is the fixture's test made flaky: on a bad commit it fails
// only on the even-numbered runs there (each commit's runs counted in a
// fresh directory), so one run per commit, as git's, sees no failure.
func (f *fixture) flakyScript(t *testing.T) string {
	counts := t.TempDir()
	return fmt.Sprintf(`echo "$KBISECT_COMMIT" >> %[2]s; n=$(( $(cat %[1]s/$KBISECT_COMMIT 2>/dev/null || echo 0) + 1 )); `+
		`echo $n > %[1]s/$KBISECT_COMMIT; grep -q good state || [ $((n %% 2)) -eq 1 ]`, counts, f.calls)
}

// TestRunConfidenceNamesTheFirstBadCommitOfAFlakyTest: plain --exec is
// fooled by the flaky test, --confidence 0.99 is not; the same command
// again answers from the state directory without running the test.
func TestRunConfidenceNamesTheFirstBadCommitOfAFlakyTest(t *testing.T) {
	f := newFixture(t, 6)
	ctx := context.Background()
	code, stdout, stderr := runCLI(t, ctx, "run", "--repo", f.dir, "--good", f.good, "--bad", f.bad, "--exec", f.flakyScript(t), "--json")
	var plain report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &plain); err != nil || code != exitOK || plain.FirstBad == f.culprit || plain.Probabilities != nil {
		t.Fatalf("plain --exec: exit %d, %+v (%v): it should be fooled\n%s", code, plain, err, stderr)
	}

	calls := len(f.tested(t))
	state := filepath.Join(t.TempDir(), "state")
	args := []string{"run", "--repo", f.dir, "--good", f.good, "--bad", f.bad, "--exec", f.flakyScript(t), "--confidence", "0.99", "--state", state}
	code, stdout, stderr = runCLI(t, ctx, append(args, "--json")...)
	var got report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != exitOK {
		t.Fatalf("exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	runs := len(f.tested(t)) - calls
	if got.Result != "found" || got.FirstBad != f.culprit || got.Probability < 0.99 || len(got.Probabilities) != 1 ||
		got.Probabilities[0].Commit != f.culprit || got.FailureRate <= 0 || got.Steps != runs || len(got.Tested) != runs {
		t.Errorf("%+v\nwant found %s after the %d runs the test made", got, f.culprit, runs)
	}
	if !strings.Contains(stderr, "Running the test on "+f.culprit[:12]+" (run 2 of this commit") {
		t.Errorf("no progress of the runs on stderr:\n%s", stderr)
	}
	t.Logf("found at %.4f after %d runs (plain --exec: %d steps, named %s)", got.Probability, runs, plain.Steps, plain.FirstBad[:12])

	code, stdout, stderr = runCLI(t, ctx, args...)
	want := fmt.Sprintf("%s is the first bad commit, probability %.3f after %d runs\n", f.culprit, got.Probability, runs)
	if code != exitOK || !strings.HasPrefix(stdout, want) || len(f.tested(t)) != calls+runs || !strings.Contains(stderr, "resuming from "+state) {
		t.Errorf("again: exit %d, %d more runs\n%s\n%s\nwant it to begin %q", code, len(f.tested(t))-calls-runs, stdout, stderr, want)
	}
}

func TestRunConfidenceIsInconclusiveWhenTheBudgetRunsOut(t *testing.T) {
	f := newFixture(t, 7)
	args := []string{"run", "--repo", f.dir, "--good", f.good, "--bad", f.bad, "--exec", f.flakyScript(t), "--confidence", "0.99", "--max-runs", "6"}
	code, stdout, stderr := runCLI(t, context.Background(), args...)
	if code != exitInconclusive || !strings.Contains(stdout, "The first bad commit could be any of:") || !strings.Contains(stdout, "budget of 6 runs") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if n := len(f.tested(t)); n != 6 {
		t.Errorf("the test ran %d times, the budget is 6", n)
	}
	code, stdout, _ = runCLI(t, context.Background(), append(args, "--json")...)
	var got report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != exitInconclusive || got.Result != "inconclusive" ||
		len(got.Probabilities) == 0 || len(got.Probabilities) != len(got.Candidates) || got.Probability != got.Probabilities[0].Probability {
		t.Errorf("exit %d, %v: %+v", code, err, got)
	}
}

func TestRunConfidenceUsageErrorsSayWhy(t *testing.T) {
	f := newFixture(t, 8)
	rng := []string{"run", "--repo", f.dir, "--good", f.good, "--bad", f.bad}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--job", "job.yaml", "--good", "a", "--bad", "b", "--confidence", "0.99"}, "verdict.confidence"},
		{append(rng, "--exec", "true", "--confidence", "1.5"), "between 0.5 and 1"},
		{append(rng, "--exec", "true", "--confidence", "0.5"), "between 0.5 and 1"},
		{append(rng, "--exec", "true", "--max-runs", "9"), "give --confidence too"},
		{append(rng, "--exec", "true", "--confidence", "0.9", "--max-runs", "0"), "positive number"},
		{[]string{"run", "--repo", f.dir, "--replay", "log", "--exec", "true", "--confidence", "0.9"}, "--replay continues"},
	} {
		code, _, stderr := runCLI(t, context.Background(), c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q, want %d saying %q", c.args[len(c.args)-4:], code, stderr, exitUsage, c.want)
		}
	}
}
