package run

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"kbisect/bisect"
	"kbisect/internal/testrepo"
	"kbisect/internal/usage"
	"kbisect/progress"
	"kbisect/report"
)

// flakyRepo is a merge-heavy history with a planted regression, and a
// test that fails on a bad commit only on its even-numbered runs there
// (each commit's runs counted in a file outside the tree): git bisect
// run, which runs each commit once, sees every commit pass.
type flakyRepo struct {
	dir, good, bad, culprit string
	counts                  string // the directory of the per-commit counters
}

func newFlakyRepo(t *testing.T) *flakyRepo {
	t.Helper()
	h := testrepo.Generate(3, testrepo.Shape{Commits: 150, Subsystems: 2, CrissCross: true})
	dir := t.TempDir()
	hashes, culprit, err := h.Regression(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &flakyRepo{dir: dir, good: hashes[0], bad: hashes[h.Mainline], culprit: hashes[culprit]}
}

// script is the flaky test, counting runs in a fresh directory.
func (f *flakyRepo) script(t *testing.T) string {
	f.counts = t.TempDir()
	return fmt.Sprintf(`c=${KBISECT_COMMIT:-$(git rev-parse HEAD)}; n=$(( $(cat %[1]s/$c 2>/dev/null || echo 0) + 1 )); echo $n > %[1]s/$c; `+
		`grep -q good state || [ $((n %% 2)) -eq 1 ]`, f.counts)
}

// runs counts the test's runs.
func (f *flakyRepo) runs(t *testing.T) int {
	entries, err := os.ReadDir(f.counts)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, e := range entries {
		var n int
		data, _ := os.ReadFile(filepath.Join(f.counts, e.Name()))
		fmt.Sscan(string(data), &n)
		total += n
	}
	return total
}

func (f *flakyRepo) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = f.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestExecWithConfidenceNamesTheCulpritOfAFlakyTestGitBisectRunMisses:
// git bisect run is fooled by the flaky test; run --exec --confidence
// names the culprit, with its probability, and leaves the tree as it was.
func TestExecWithConfidenceNamesTheCulpritOfAFlakyTestGitBisectRunMisses(t *testing.T) {
	f := newFlakyRepo(t)
	f.git(t, "bisect", "start", f.bad, f.good)
	oracle := f.git(t, "bisect", "run", "sh", "-c", f.script(t))
	f.git(t, "bisect", "reset")
	if strings.Contains(oracle, f.culprit+" is the first bad commit") {
		t.Fatalf("git bisect run found the culprit of the flaky test: no test of --confidence\n%s", oracle)
	}
	head := f.git(t, "rev-parse", "HEAD")

	view := &recorder{}
	state := filepath.Join(t.TempDir(), "state")
	res, err := Exec(context.Background(), ExecOptions{Range: Range{Goods: []string{f.good}, Bad: f.bad}, Repo: f.dir,
		Exec: f.script(t), State: state, Confidence: 0.99, Progress: view})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	j := res.JSON
	if res.Kind != bisect.Found || j.FirstBad != f.culprit || j.Probability < 0.99 || len(j.Probabilities) != 1 ||
		j.Probabilities[0].Commit != f.culprit || !(j.FailureRate > 0.2 && j.FailureRate < 0.8) {
		t.Fatalf("%s %s at %g (%+v, failure rate %g), want found %s\n%s", res.Kind, j.FirstBad, j.Probability, j.Probabilities, j.FailureRate, f.culprit, oracle)
	}
	if runs := f.runs(t); j.Steps != runs || len(view.testing) != runs {
		t.Errorf("the test ran %d times; the answer says %d steps, the view heard %d", runs, j.Steps, len(view.testing))
	}
	t.Logf("found %s at %.4f after %d runs (git bisect run: %d)", j.FirstBad[:12], j.Probability, j.Steps, strings.Count(oracle, "Bisecting:"))
	if now := f.git(t, "rev-parse", "HEAD"); now != head {
		t.Errorf("HEAD is %s, was %s", now, head)
	}
	if _, err := os.Stat(filepath.Join(state, "result.json")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(state, "git-bisect.log")); err == nil {
		t.Error("a git-bisect.log of contradicting verdicts was written")
	}
	var text bytes.Buffer
	report.WriteGitResult(context.Background(), &text, res.Graph, res.Bisection)
	if want := fmt.Sprintf("%s is the first bad commit, probability %.3f after %d runs\n", f.culprit, j.Probability, j.Steps); !strings.HasPrefix(text.String(), want) {
		t.Errorf("the answer:\n%s\nwant it to begin %q", text.String(), want)
	}
}

// TestExecWithConfidenceResumesAnInterruptedRunByReplayingItsRuns: a run
// stopped halfway goes on from its state directory to the same runs and
// the same answer as a run never stopped.
func TestExecWithConfidenceResumesAnInterruptedRunByReplayingItsRuns(t *testing.T) {
	f := newFlakyRepo(t)
	o := ExecOptions{Range: Range{Goods: []string{f.good}, Bad: f.bad}, Repo: f.dir, Exec: f.script(t),
		State: filepath.Join(t.TempDir(), "whole"), Confidence: 0.99}
	whole, err := Exec(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	whole.Close()

	o.Exec, o.State = f.script(t), filepath.Join(t.TempDir(), "stopped")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := 0
	o.Progress = progress.Func(func(e progress.Event) {
		if e.Kind == progress.Tested {
			if ran++; ran == 10 {
				cancel()
			}
		}
	})
	if res, err := Exec(ctx, o); err == nil || res.Kind != bisect.Aborted || res.JSON.Steps != 10 {
		t.Fatalf("interrupted: %v, %s after %d steps", err, res.Kind, res.JSON.Steps)
	}
	var msgs bytes.Buffer
	o.Progress, o.Messages = nil, &msgs
	res, err := Exec(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	if !strings.Contains(msgs.String(), "resuming from") {
		t.Errorf("no resume: %q", msgs.String())
	}
	var got, want []string
	for _, tc := range res.JSON.Tested {
		got = append(got, tc.Commit+string(tc.Verdict))
	}
	for _, tc := range whole.JSON.Tested {
		want = append(want, tc.Commit+string(tc.Verdict))
	}
	if !slices.Equal(got, want) || res.JSON.FirstBad != whole.JSON.FirstBad || res.JSON.Probability != whole.JSON.Probability {
		t.Errorf("resumed: %d runs to %s at %g; uninterrupted: %d runs to %s at %g",
			len(got), res.JSON.FirstBad, res.JSON.Probability, len(want), whole.JSON.FirstBad, whole.JSON.Probability)
	}
	if runs := f.runs(t); runs != len(got) {
		t.Errorf("the test ran %d times for %d runs recorded", runs, len(got))
	}
}

func TestExecWithConfidenceRefusesWhatItCannotBisect(t *testing.T) {
	f := newFlakyRepo(t)
	for want, o := range map[string]ExecOptions{
		"between 0.5 and 1":        {Range: Range{Goods: []string{f.good}, Bad: f.bad}, Confidence: 1},
		"--replay continues git's": {Range: Range{Replay: "log"}, Confidence: 0.9},
		"with --confidence":        {Range: Range{Goods: []string{f.good}, Bad: f.bad}, MaxRuns: 10},
		"an ancestor of --bad":     {Range: Range{Goods: []string{f.bad}, Bad: f.good}, Confidence: 0.9},
	} {
		o.Repo, o.Exec = f.dir, "true"
		res, err := Exec(context.Background(), o)
		if err == nil || !usage.Is(err) || !strings.Contains(err.Error(), want) || res.Kind != bisect.Aborted {
			t.Errorf("%v (%s), want a usage error saying %q", err, res.Kind, want)
		}
		res.Close()
	}
}
