package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDemoNoiseSettingsThatCannotBeAreUsageErrors: a bad --noise stops
// the demo before it makes a lab, naming the flag and the setting.
func TestDemoNoiseSettingsThatCannotBeAreUsageErrors(t *testing.T) {
	for in, want := range map[string]string{
		"bogus=1":       `demo --noise bogus=1: "bogus": no such setting; the settings are spread, boot-spread, bad-boots, stray-boots, spikes, flips, drift, boot-ar, intermittent, spikes-bad, sample-t, boot-t, spike-tail and good-mode`,
		"spread":        `demo --noise spread: "spread": write setting=value, as in spread=0.2`,
		"bad-boots=60%": "demo --noise bad-boots=60%: bad-boots 0.6 is not between 0 and 0.5",
	} {
		code, stdout, stderr := runCLI(t, context.Background(), "demo", "--dir", t.TempDir(), "--noise", in)
		if code != exitUsage || !strings.Contains(stderr, want) || stdout != "" || strings.Contains(stderr, "SIMULATED lab") {
			t.Errorf("--noise %s: exit %d, stdout %q, stderr %q; want exit %d and %q", in, code, stdout, stderr, exitUsage, want)
		}
	}
	code, stdout, _ := runCLI(t, context.Background(), "demo", "--noise", "bogus=1", "--json")
	var out struct{ Result, Error string }
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitUsage || out.Result != "aborted" || !strings.Contains(out.Error, "demo --noise bogus=1") {
		t.Errorf("--json: exit %d, %v, %q", code, err, stdout)
	}
}

// TestDemoWithMildNoiseFindsThePlantedRegression: with a spread within
// each boot of 10 % the demo still finds the planted commit, and says
// which noise its lab had.
func TestDemoWithMildNoiseFindsThePlantedRegression(t *testing.T) {
	code, stdout, stderr := runCLI(t, context.Background(), "demo", "--commits", "120", "--dir", t.TempDir(), "--noise", "spread=0.1")
	if code != exitOK || !strings.Contains(stdout, " is the first bad commit\n") ||
		!strings.Contains(stderr, "  noise:   as real machines have it, spread=0.1,boot-spread=0,") ||
		!strings.Contains(stderr, "kbisect demo: found the planted regression ") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestDemoDirResumesAfterAnInterruption: a demo stopped mid-run and
// started again with the same --dir goes on: the same hosts (keys and
// ports, so the job and its state hold), the boots already measured kept,
// and the planted commit found. Other options for the same dir are a
// usage error that says what to do.
func TestDemoDirResumesAfterAnInterruption(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "state", "search.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // stop once a few boots are journaled
		defer cancel()
		for ctx.Err() == nil {
			if b, err := os.ReadFile(journal); err == nil && bytes.Count(b, []byte("\n")) >= 8 {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	code, _, stderr := runCLI(t, ctx, "demo", "--commits", "120", "--dir", dir)
	if code == exitOK {
		t.Fatalf("the first demo ended before it was stopped:\n%s", stderr)
	}
	if !strings.Contains(stderr, "the state is in "+dir+"; the same command resumes it:\n  kbisect demo --commits 120 --dir "+dir+"\n") {
		t.Errorf("the stopped demo does not say how to resume it:\n%s", stderr)
	}
	before, err := os.ReadFile(journal)
	if err != nil || bytes.Count(before, []byte("\n")) < 8 {
		t.Fatalf("journal after the stop: %d lines, %v", bytes.Count(before, []byte("\n")), err)
	}

	code, stdout, stderr := runCLI(t, context.Background(), "demo", "--commits", "120", "--dir", dir)
	if code != exitOK || !strings.Contains(stderr, "kbisect demo: the lab in "+dir+" was made before") ||
		!strings.Contains(stderr, "kbisect: resuming from "+filepath.Join(dir, "state")) ||
		!strings.Contains(stderr, "kbisect demo: found the planted regression ") || !strings.Contains(stdout, " is the first bad commit\n") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// The report reproduces the demo, not a run whose emulated host is gone.
	if unwrapped := strings.ReplaceAll(stdout, "\n  ", " "); !strings.Contains(unwrapped, "Reproduce: kbisect demo --dir "+dir+" --seed 1 --commits 120\n") {
		t.Errorf("the report's Reproduce line:\n%s", stdout)
	}
	after, err := os.ReadFile(journal)
	if err != nil || !bytes.HasPrefix(after, before) {
		t.Fatalf("the resumed run did not keep the journal's boots (%v)", err)
	}

	code, _, stderr = runCLI(t, context.Background(), "demo", "--commits", "200", "--dir", dir)
	if code != exitUsage || !strings.Contains(stderr, "demo --dir: simlab: "+dir+" holds a lab made with other options (seed 1, 120 commits") ||
		!strings.Contains(stderr, "give the same ones to go on with it, or another directory") {
		t.Fatalf("other options for the same dir: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runCLI(t, context.Background(), "demo", "--commits", "120", "--machines", "2", "--dir", dir)
	if code != exitUsage || !strings.Contains(stderr, "the lab there has 1 machine, not 2: give --machines 1") {
		t.Fatalf("other machines for the same dir: exit %d\n%s", code, stderr)
	}
}

// TestDemoOnThreeMachinesBootsOnEach: demo --machines 3 runs the
// posterior search on all three simulated machines: the journal shows
// boots of the search (not only the endpoints') on each, the report says
// each machine's boots, and the planted commit is found.
func TestDemoOnThreeMachinesBootsOnEach(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCLI(t, context.Background(), "demo", "--commits", "200", "--machines", "3", "--dir", dir)
	if code != exitOK || !strings.Contains(stderr, "kbisect demo: found the planted regression ") ||
		!strings.Contains(strings.Join(strings.Fields(stdout), " "), " on 3 machines (simlab ") || !strings.Contains(stderr, "3 machines, one posterior") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	search := map[string]int{}
	for _, r := range journal(t, filepath.Join(dir, "state")) {
		if r.Kind == "boot" {
			search[r.Machine]++
		}
	}
	for _, m := range []string{"simlab", "simlab-2", "simlab-3"} {
		if search[m] == 0 {
			t.Errorf("%s booted nothing the search asked for: %v", m, search)
		}
	}
}
