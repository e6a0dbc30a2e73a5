package run

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"kbisect/bisect"
	"kbisect/internal/simlab"
	"kbisect/internal/testrepo"
	"kbisect/internal/usage"
	"kbisect/progress"
)

// recorder is a progress sink that keeps what it heard.
type recorder struct {
	mu      sync.Mutex
	testing []string
	tested  map[string]string
	phases  int
	lines   []string
	done    int
}

func (r *recorder) Emit(e progress.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e.Kind {
	case progress.Testing:
		if e.Subject == "" {
			r.lines = append(r.lines, "no subject for "+e.Commit)
		}
		r.testing = append(r.testing, e.Commit)
	case progress.Tested:
		if r.tested == nil {
			r.tested = map[string]string{}
		}
		r.tested[e.Commit] = string(e.Verdict)
	case progress.Phase:
		r.phases++
	case progress.Line:
		r.lines = append(r.lines, e.Text)
	case progress.Done:
		r.done++
	}
}

// TestJobFindsThePlantedRegressionAndResumesFromItsState calls the use
// case as the CLI, the nightly and the demo do: options in, a typed result
// and the view's events out; the same options again answer from the state
// directory.
func TestJobFindsThePlantedRegressionAndResumesFromItsState(t *testing.T) {
	if err := simlab.Requirements(); err != nil {
		t.Skip(err)
	}
	l, err := simlab.New(t.TempDir(), simlab.Options{Seed: 5, Commits: 80})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	want := l.Tree.Expected.FirstBad
	if want == "" {
		t.Fatal("seed 5 planted its regression among commits that do not build: pick another seed")
	}
	view := &recorder{}
	var msgs bytes.Buffer
	o := JobOptions{Range: Range{Goods: []string{l.Tree.Good}, Bad: l.Tree.Bad}, Jobs: []string{l.JobFile},
		State: filepath.Join(t.TempDir(), "state"), Messages: &msgs, Progress: view}
	res, err := Job(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, msgs.String())
	}
	defer res.Close()
	if res.Kind != bisect.Found || res.JSON.FirstBad != want || !res.Ended {
		t.Fatalf("result %s %s (ended %v), want found %s", res.Kind, res.JSON.FirstBad, res.Ended, want)
	}
	s := res.Report.Search
	if s == nil || s.Result != "found" || s.Probability < 0.99 || res.JSON.Posterior == nil || s.Boots != len(view.testing) {
		t.Fatalf("the search's summary: %+v (the view heard %d boots)", s, len(view.testing))
	}
	if s.CalibrationBoots < 6 || len(s.Candidates) == 0 || s.Candidates[0].Commit != want {
		t.Errorf("calibration boots %d, candidates %+v", s.CalibrationBoots, s.Candidates)
	}
	if view.done != 1 || view.phases == 0 {
		t.Errorf("the view heard %d phases, done %d times", view.phases, view.done)
	}
	if view.tested[want] != "bad" || slices.ContainsFunc(view.lines, func(l string) bool { return strings.HasPrefix(l, "no subject") }) {
		t.Errorf("the view heard %s judged %q", want, view.tested[want])
	}
	if _, err := os.Stat(filepath.Join(o.State, "result.json")); err != nil {
		t.Errorf("no result.json in the state directory: %v", err)
	}
	var text bytes.Buffer
	res.Report.WriteText(context.Background(), &text)
	if !strings.HasPrefix(text.String(), want+" is the first bad commit\n") {
		t.Errorf("the report:\n%s", text.String())
	}

	// Again: nothing is measured, the answer is the same.
	again := &recorder{}
	msgs.Reset()
	o.Progress = again
	res2, err := Job(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer res2.Close()
	if res2.JSON.FirstBad != want || !strings.Contains(msgs.String(), "kbisect: resuming from "+o.State) || len(again.testing) != 0 {
		t.Errorf("resumed: first bad %s, %d steps tested again, messages:\n%s", res2.JSON.FirstBad, len(again.testing), msgs.String())
	}
}

func TestJobOptionsThatCannotRunAreUsageErrors(t *testing.T) {
	for name, o := range map[string]JobOptions{
		"no bad":           {Range: Range{Goods: []string{"v1"}}, Jobs: []string{"job.yaml"}},
		"replay and range": {Range: Range{Goods: []string{"v1"}, Bad: "v2", Replay: "log"}, Jobs: []string{"job.yaml"}},
		"no job":           {Range: Range{Goods: []string{"v1"}, Bad: "v2"}},
		"no such job file": {Range: Range{Goods: []string{"v1"}, Bad: "v2"}, Jobs: []string{filepath.Join(t.TempDir(), "none.yaml")}},
	} {
		res, err := Job(context.Background(), o)
		if err == nil || res == nil || res.Kind != bisect.Aborted || res.JSON.Result != "aborted" || res.JSON.Error == "" {
			t.Errorf("%s: %v, %+v", name, err, res)
			continue
		}
		if name != "no such job file" && !usage.Is(err) {
			t.Errorf("%s: %v is not a usage error", name, err)
		}
	}
}

// TestABOptionsThatCannotRunAreUsageErrors: kernels named wrong are said
// before the job file is even opened.
func TestABOptionsThatCannotRunAreUsageErrors(t *testing.T) {
	for _, c := range []struct {
		o    ABOptions
		want string
	}{
		{ABOptions{A: "v1"}, "give --a REV and --b REV"},
		{ABOptions{A: "v1", B: "v2", Base: "v2", Revert: "abc"}, "drop --a and --b"},
		{ABOptions{Base: "v2"}, "one of them"},
		{ABOptions{Base: "v2", Revert: "abc", Patch: "fix.patch"}, "one of them"},
		{ABOptions{A: "v1", B: "v2", Patch: "fix.patch"}, "need --base REV"},
		{ABOptions{A: "v1", B: "v2", Rounds: -1}, "must be positive"},
	} {
		c.o.Job = filepath.Join(t.TempDir(), "none.yaml")
		res, err := AB(context.Background(), c.o)
		if res != nil || !usage.Is(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, %v; want a usage error saying %q", c.o, res, err, c.want)
		}
	}
}

// TestExecNamesTheCommitGitBisectRunNamesAndPutsHeadBack checks run.Exec
// against git bisect run itself on a merge-heavy history.
func TestExecNamesTheCommitGitBisectRunNamesAndPutsHeadBack(t *testing.T) {
	h := testrepo.Generate(7, testrepo.Shape{Commits: 120, Subsystems: 2, CrissCross: true})
	dir := t.TempDir()
	hashes, culprit, err := h.Regression(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	good, bad := hashes[0], hashes[h.Mainline]
	git("bisect", "start", bad, good)
	oracle := git("bisect", "run", "sh", "-c", "grep -q good state")
	git("bisect", "reset")
	head := git("rev-parse", "HEAD")

	steps := &recorder{}
	res, err := Exec(context.Background(), ExecOptions{Range: Range{Goods: []string{good}, Bad: bad}, Repo: dir, Exec: "grep -q good state",
		Progress: steps})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	if res.Kind != bisect.Found || res.JSON.FirstBad != hashes[culprit] || !strings.Contains(oracle, hashes[culprit]+" is the first bad commit") {
		t.Errorf("kbisect: %s %s; git bisect run:\n%s", res.Kind, res.JSON.FirstBad, oracle)
	}
	if len(steps.testing) != res.JSON.Steps {
		t.Errorf("the progress heard %d steps, the answer says %d", len(steps.testing), res.JSON.Steps)
	}
	if now := git("rev-parse", "HEAD"); now != head {
		t.Errorf("HEAD is %s, was %s", now, head)
	}
}
