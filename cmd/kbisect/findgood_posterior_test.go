package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kbisect/internal/simlab"
	"kbisect/report"
)

// TestRunJobWalksBackByThePosterior is the walk back of the posterior
// search (the default): the regression is three releases below the good
// tag given. Without --find-good the run ends not reproduced and says
// how to go on. With it, each release below is booted until its boots
// say whether it measures apart from the bad endpoint; stopped after the
// walk's first boot and resumed, the run goes on from the journal, takes
// v6.12.54 as the good endpoint, searches from it to the bad endpoint
// (the walk's boots its evidence) and names the planted commit; the JSON
// says what the walk tried, and a run resumed after the answer boots
// nothing.
func TestRunJobWalksBackByThePosterior(t *testing.T) {
	longUnderRace(t)
	l := simLab(t, simlab.Options{Seed: 21, Commits: 200, OlderReleases: 6, RegressionBack: 3, BrokenBuilds: -1})
	state := filepath.Join(t.TempDir(), "state")
	args := []string{"run", "--job", l.JobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", state, "--json"}

	code, stdout, stderr := runCLI(t, context.Background(), args...)
	if code != exitNotReproduced || !strings.Contains(stdout, "--find-good") || strings.Contains(stderr, "walking back") {
		t.Fatalf("without --find-good: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	cal := len(journal(t, state))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			for _, r := range journal(t, state) {
				if r.Kind == "release" {
					cancel()
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	code, _, stderr = runCLI(t, ctx, append(args, "--find-good")...)
	if code != exitInterrupted {
		t.Fatalf("stopped at the walk's first boot: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "walking back along the releases below v6.12.57") {
		t.Errorf("the progress does not say it walks back:\n%s", stderr)
	}
	code, stdout, stderr = runCLI(t, context.Background(), append(args, "--find-good")...)
	var out report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitOK {
		t.Fatalf("resumed with --find-good: exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	if out.Result != "found" || out.FirstBad != l.Tree.Regression {
		t.Fatalf("found %s %s, want %s\n%s", out.Result, out.FirstBad, l.Tree.Regression, stderr)
	}
	fg := out.FindGood
	if fg == nil {
		t.Fatalf("no find_good in the JSON:\n%s", stdout)
	}
	var walked []string
	for _, try := range fg.Tried {
		walked = append(walked, try.Tag+" "+string(try.Verdict))
	}
	if got, want := strings.Join(walked, ", "), "v6.12.56 bad, v6.12.54 good"; got != want {
		t.Errorf("walked %q, want %q", got, want)
	}
	if fg.Given != l.Tree.GoodCommit || fg.Found != "v6.12.54" || fg.Good != tagCommit(t, l.Tree.Dir, "v6.12.54") || fg.Kernels != 2 {
		t.Errorf("find_good %+v", fg)
	}
	releases := 0
	for _, r := range journal(t, state)[cal:] {
		if r.Kind == "release" {
			releases++
		}
	}
	if releases < 4 || releases > 12 {
		t.Errorf("the walk took %d boots of 2 releases: want 4 to 12", releases)
	}
	t.Logf("calibration %d boots; the walk %d", cal, releases)

	before := len(journal(t, state))
	code, stdout, stderr = runCLI(t, context.Background(), append(args, "--find-good")...)
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitOK || out.FirstBad != l.Tree.Regression || len(journal(t, state)) != before {
		t.Errorf("resumed after the answer: exit %d, %s, %d boots more: %v\n%s", code, out.FirstBad, len(journal(t, state))-before, err, stderr)
	}
	// The text report says it in words.
	code, text, stderr := runCLI(t, context.Background(), "report", "--state", state)
	text = strings.Join(strings.Fields(text), " ") // unwrapped
	if code != exitOK || !strings.Contains(text, "The good endpoint v6.12.57 measured bad") ||
		!strings.Contains(text, "cost 2 kernels (v6.12.56 bad, v6.12.54 good)") ||
		!strings.Contains(text, "the bisection ran from v6.12.54 (good) to "+l.Tree.Bad+" (bad)") {
		t.Errorf("the text report: exit %d\n%s\n%s", code, text, stderr)
	}
}

// TestRunJobWalksBackOnThreeMachines: the posterior's walk back on three
// machines at once: each boots the release judged, and the search from
// the release found names the planted commit.
func TestRunJobWalksBackOnThreeMachines(t *testing.T) {
	l, state, args := threeMachines(t, simlab.Options{Seed: 21, Commits: 200, OlderReleases: 6, RegressionBack: 3, BrokenBuilds: -1})
	code, stdout, stderr := runCLI(t, context.Background(), append(args, "--find-good")...)
	var out report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitOK || out.FirstBad != l.Tree.Regression {
		t.Fatalf("exit %d, first bad %s, want %s: %v\n%s", code, out.FirstBad, l.Tree.Regression, err, stderr)
	}
	if out.FindGood == nil || out.FindGood.Found != "v6.12.54" {
		t.Errorf("find_good %+v", out.FindGood)
	}
	on := map[string]int{}
	for _, r := range journal(t, state) {
		if r.Kind == "release" {
			on[r.Machine]++
		}
	}
	if len(on) < 2 {
		t.Errorf("the walk booted on %v: want two machines or more", on)
	}
}

// TestRunJobRefusesTheRuleSearch: a job that asks run --job for git's
// choice of commits (verdict.search: rule) is a usage error that says
// where the key is and what to do, before anything is measured.
func TestRunJobRefusesTheRuleSearch(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 3, Commits: 60})
	job, err := os.ReadFile(l.JobFile)
	if err != nil {
		t.Fatal(err)
	}
	ruled := strings.Replace(string(job), "\nverdict:\n", "\nverdict:\n  search: rule\n", 1)
	if ruled == string(job) {
		t.Fatalf("no verdict section in\n%s", job)
	}
	if err := os.WriteFile(l.JobFile, []byte(ruled), 0o644); err != nil {
		t.Fatal(err)
	}
	line := strings.Count(ruled[:strings.Index(ruled, "search: rule")], "\n") + 1
	state := filepath.Join(t.TempDir(), "state")
	code, stdout, stderr := runCLI(t, context.Background(), "run", "--job", l.JobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", state)
	want := fmt.Sprintf("%s:%d:11: verdict.search: rule: run --job searches by the posterior only", l.JobFile, line)
	if code != exitUsage || !strings.Contains(stderr, want) || !strings.Contains(stderr, "remove the key") || len(l.Host.Boots()) != 0 {
		t.Fatalf("exit %d, %d boots, want %d and %q\nstdout:\n%s\nstderr:\n%s", code, len(l.Host.Boots()), exitUsage, want, stdout, stderr)
	}
	if _, err := os.Stat(state); err == nil {
		t.Errorf("the refused run left a state directory %s", state)
	}
}
