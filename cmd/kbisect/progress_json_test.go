package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/internal/simlab"
	"kbisect/progress"
)

// jsonEvents reads stderr as --progress json writes it: every line one
// object, of a kind the view knows.
func jsonEvents(t *testing.T, stderr string) []progress.JSONEvent {
	t.Helper()
	var out []progress.JSONEvent
	for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		var e progress.JSONEvent
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("a line of stderr is not one JSON object (%v): %q", err, l)
		}
		switch e.Kind {
		case "line", "command", "warning", "note", "testing", "tested", "phase", "done":
		default:
			t.Errorf("an event of kind %q: %q", e.Kind, l)
		}
		if e.Time == "" {
			t.Errorf("an event without its time: %q", l)
		}
		out = append(out, e)
	}
	return out
}

// run --job --progress json: each step's event carries its commit, the
// search's boots so far, the leader's probability and the forecast of
// the boots and seconds left with their range; the lab's phases and
// kbisect's own lines are events too, and nothing else is on stderr.
func TestProgressJSONTellsEachStepAndItsForecast(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 5, Commits: 60})
	state := filepath.Join(t.TempDir(), "state")
	code, stdout, stderr := runCLI(t, context.Background(), "run", "--job", l.JobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", state, "--progress", "json")
	if code != exitOK || !strings.HasPrefix(stdout, l.Tree.Expected.FirstBad+" is the first bad commit\n") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	steps, phases, lines := 0, 0, 0
	last := -1
	for _, e := range jsonEvents(t, stderr) {
		switch e.Kind {
		case "testing":
			steps++
			if len(e.Commit) != 40 || e.Boot < last || e.Probability <= 0 || e.BootsLeft < 1 || e.BootsLow > e.BootsLeft || e.BootsHigh < e.BootsLeft ||
				e.SecondsLeft <= 0 || e.SecondsLow > e.SecondsLeft || e.SecondsHigh < e.SecondsLeft || !strings.HasPrefix(e.Text, "Measuring ") {
				t.Errorf("a step without its numbers: %+v", e)
			}
			last = e.Boot
		case "phase":
			phases++
		case "line":
			lines++
		}
	}
	if steps < 5 || phases < 3*steps || lines < 2 {
		t.Errorf("%d steps, %d phase events, %d lines:\n%s", steps, phases, lines, stderr)
	}
}

// run --exec --progress json: git's steps and the test's own output are
// events; a --progress that is not one of the three is a usage error.
func TestProgressJSONOfAnExecBisection(t *testing.T) {
	f := newFixture(t, 6)
	code, stdout, stderr := runCLI(t, context.Background(), "run", "--repo", f.dir, "--good", f.good, "--bad", f.bad, "--exec", "echo tested-it; "+f.script, "--progress", "json")
	if code != exitOK || !strings.HasPrefix(stdout, f.culprit+" is the first bad commit") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	steps, said := 0, 0
	for _, e := range jsonEvents(t, stderr) {
		switch {
		case e.Kind == "testing" && len(e.Commit) == 40:
			steps++
		case e.Kind == "line" && e.Text == "tested-it":
			said++
		}
	}
	if steps < 2 || said < steps {
		t.Errorf("%d steps, the test's line %d times:\n%s", steps, said, stderr)
	}

	code, _, stderr = runCLI(t, context.Background(), "run", "--repo", f.dir, "--good", f.good, "--bad", f.bad, "--exec", "true", "--progress", "yaml")
	if code != exitUsage || !strings.Contains(stderr, `--progress "yaml": give auto, lines or json`) {
		t.Errorf("exit %d: %s", code, stderr)
	}
}
