package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"kbisect/history"
	"kbisect/internal/simhost"
	"kbisect/internal/simlab"
	"kbisect/nightly"
	"kbisect/verdict"
)

// stableUpstream publishes a simulated lab's releases night by night: a
// bare repository the nightly fetches from, and the job's own tree, a
// clone of it.
type stableUpstream struct {
	t        *testing.T
	lab      *simlab.Lab
	bare     string
	jobFile  string
	db       string
	tagOf    map[string]string // tag → commit
	releases []string          // in order of publication
}

func newStableUpstream(t *testing.T, l *simlab.Lab) *stableUpstream {
	t.Helper()
	dir := t.TempDir()
	u := &stableUpstream{t: t, lab: l, bare: filepath.Join(dir, "upstream.git"), db: filepath.Join(dir, "history.db"), tagOf: map[string]string{}}
	u.git(l.Tree.Dir, "init", "-q", "--bare", u.bare)
	for _, tag := range l.Tree.Releases {
		u.tagOf[tag] = u.git(l.Tree.Dir, "rev-parse", tag+"^{commit}")
		u.releases = append(u.releases, tag)
	}
	return u
}

func (u *stableUpstream) git(dir string, args ...string) string {
	u.t.Helper()
	c := exec.Command("git", append([]string{"-C", dir}, args...)...)
	c.Env = append(os.Environ(), "GIT_AUTHOR_NAME=stable", "GIT_AUTHOR_EMAIL=stable@example.org", "GIT_COMMITTER_NAME=stable", "GIT_COMMITTER_EMAIL=stable@example.org")
	out, err := c.CombinedOutput()
	if err != nil {
		u.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// publish pushes tags (and the branch up to the last) to the upstream;
// the first time, it makes the job's tree as a clone of it.
func (u *stableUpstream) publish(tags ...string) {
	u.t.Helper()
	for _, tag := range tags {
		u.git(u.lab.Tree.Dir, "push", "-q", "--force", u.bare, tag+"^{commit}:refs/heads/linux-6.12.y", "refs/tags/"+tag)
	}
	if u.jobFile != "" {
		return
	}
	tree := filepath.Join(filepath.Dir(u.bare), "linux")
	u.git(u.lab.Tree.Dir, "clone", "-q", "--branch", "linux-6.12.y", u.bare, tree)
	job, err := os.ReadFile(u.lab.JobFile)
	if err != nil {
		u.t.Fatal(err)
	}
	fixed := regexp.MustCompile(`(?m)^(\s+tree:) .*$`).ReplaceAll(job, []byte("$1 "+tree))
	if string(fixed) == string(job) {
		u.t.Fatalf("no build.tree in the job:\n%s", job)
	}
	u.jobFile = filepath.Join(filepath.Dir(u.bare), "job.yaml")
	if err := os.WriteFile(u.jobFile, fixed, 0o644); err != nil {
		u.t.Fatal(err)
	}
}

// editJob changes the job file: every match of the pattern becomes repl.
func (u *stableUpstream) editJob(pattern, repl string) {
	u.t.Helper()
	job, err := os.ReadFile(u.jobFile)
	if err != nil {
		u.t.Fatal(err)
	}
	edited := regexp.MustCompile(pattern).ReplaceAll(job, []byte(repl))
	if string(edited) == string(job) {
		u.t.Fatalf("%q is not in the job", pattern)
	}
	if err := os.WriteFile(u.jobFile, edited, 0o644); err != nil {
		u.t.Fatal(err)
	}
}

// night runs kbisect nightly --json.
func (u *stableUpstream) night() (int, nightly.Result, string) {
	u.t.Helper()
	code, stdout, stderr := runCLI(u.t, context.Background(), "nightly", "--job", u.jobFile, "--remote", u.bare, "--branch", "linux-6.12.y",
		"--tags", "v6.12.*", "--db", u.db, "--json")
	var out nightly.Result
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		u.t.Fatalf("nightly: exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	return code, out, stderr
}

// firstBad is the index of the first release that carries the regression.
func (u *stableUpstream) firstBad() int {
	for i, tag := range u.releases {
		if u.lab.Tree.IsBad(u.tagOf[tag]) {
			return i
		}
	}
	u.t.Fatal("no release carries the regression")
	return -1
}

func measuredTags(out nightly.Result) string {
	var s []string
	for _, m := range out.Measured {
		s = append(s, m.Tag+" "+string(m.Verdict))
	}
	return strings.Join(s, ", ")
}

// TestNightlyFindsTheRegressionTheNightItsTagAppears publishes a
// stable-like series night by night: the first night measures the
// baseline; the night the first bad tag appears, the regression is
// found and bisected to the planted commit; the next night it is still
// present and nothing is bisected; a later tag that reverts it closes the
// incident; kbisect history shows it all.
func TestNightlyFindsTheRegressionTheNightItsTagAppears(t *testing.T) {
	longUnderRace(t)
	l := simLab(t, simlab.Options{Seed: 31, Commits: 160, BrokenBuilds: -1})
	u := newStableUpstream(t, l)
	k := u.firstBad()
	if k < 2 || k+1 >= len(u.releases) {
		t.Fatalf("the regression is in release %d of %d: the seed does not fit the story", k, len(u.releases))
	}

	u.publish(u.releases[0])
	u.editJob(`$`, "\nreport:\n  formats: [text, markdown, html, junit]\n  dir: reports\n")
	code, out, stderr := u.night()
	if code != exitOK || out.Result != "no-regression" || measuredTags(out) != u.releases[0]+" good" {
		t.Fatalf("night 1: exit %d, %+v\n%s", code, out, stderr)
	}
	code, out, _ = u.night()
	if code != exitOK || out.Result != "nothing-new" || len(out.Measured) != 0 {
		t.Errorf("night 1 again: exit %d, %+v", code, out)
	}

	u.publish(u.releases[1 : k-1]...) // quiet nights
	if code, out, stderr = u.night(); code != exitOK || out.Result != "no-regression" {
		t.Fatalf("night 2: exit %d, %+v\n%s", code, out, stderr)
	}

	u.publish(u.releases[k-1 : k+1]...) // a missed night: the last good tag and the first bad one
	code, out, stderr = u.night()
	// The first bad release, the baseline measured again to confirm it,
	// the missed release below it.
	want := fmt.Sprintf("%s good, %s bad, %s good", u.releases[k-2], u.releases[k], u.releases[k-1])
	if code != exitRegression || out.Result != "regression" || measuredTags(out) != want || out.Incident == nil {
		t.Fatalf("night 3: exit %d, %+v (want %s)\n%s", code, out, want, stderr)
	}
	inc := out.Incident
	if inc.LastGood != u.releases[k-1] || inc.FirstBad != u.releases[k] || inc.Result != "found" || inc.Commit != l.Tree.Regression {
		t.Errorf("night 3: incident %+v, the regression is %s", inc, l.Tree.Regression)
	}
	if _, err := os.Stat(filepath.Join(inc.StateDir, "result.json")); err != nil {
		t.Errorf("the incident's state directory has no report: %v", err)
	}
	// The night's own reports in report.dir (relative to the job file),
	// the bisection's in the incident's directory.
	nightly := filepath.Join(filepath.Dir(u.jobFile), "reports")
	if _, err := os.Stat(filepath.Join(inc.StateDir, "report.junit.xml")); err != nil {
		t.Errorf("the bisection's reports: %v", err)
	}
	if _, err := os.Stat(filepath.Join(nightly, "report.txt")); err == nil {
		t.Errorf("the bisection's reports are in report.dir, where each incident would replace the last")
	}
	junit, _ := os.ReadFile(filepath.Join(nightly, "night.junit.xml"))
	for _, want := range []string{`tests="4" failures="2"`, `name="no regression on simlab"`, `<failure message="regression: simlab: a regression between ` + u.releases[k-1],
		u.tagOf[u.releases[k]][:12] + " " + u.releases[k] + `"`, `type="bad"`} {
		if !strings.Contains(string(junit), want) {
			t.Errorf("night.junit.xml lacks %s:\n%s", want, junit)
		}
	}
	text, _ := os.ReadFile(filepath.Join(nightly, "night.txt"))
	for _, want := range []string{"kbisect nightly: simlab: regression", "Measured tonight", u.releases[k] + " ", "against " + u.releases[k-2], "<- incident 1"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("night.txt lacks %q:\n%s", want, text)
		}
	}
	if md, _ := os.ReadFile(filepath.Join(nightly, "night.md")); !strings.Contains(string(md), "| "+u.releases[k]+" | bad |") {
		t.Errorf("night.md:\n%s", md)
	}

	u.publish(u.releases[k+1])
	code, out, stderr = u.night()
	if code != exitRegression || out.Result != "still-present" || out.Incident == nil || out.Incident.ID != inc.ID || strings.Contains(stderr, "bisecting") {
		t.Errorf("night 4: exit %d, %+v\n%s", code, out, stderr)
	}

	// A release that reverts the regression.
	fix := filepath.Join(t.TempDir(), "fix")
	u.git(l.Tree.Dir, "worktree", "add", "-q", "--detach", fix, u.releases[k+1])
	u.git(fix, "revert", "--no-edit", l.Tree.Regression)
	u.git(fix, "tag", "v6.12.99")
	u.publish("v6.12.99")
	code, out, stderr = u.night()
	if code != exitOK || out.Result != "fixed" || out.Incident == nil || out.Incident.ClosedTag != "v6.12.99" || !strings.Contains(out.Message, "fixed in v6.12.99") {
		t.Errorf("night 5: exit %d, %+v\n%s", code, out, stderr)
	}
	if junit, _ = os.ReadFile(filepath.Join(nightly, "night.junit.xml")); !strings.Contains(string(junit), `tests="2" failures="0"`) {
		t.Errorf("night 5: night.junit.xml:\n%s", junit)
	}
	if page, _ := os.ReadFile(filepath.Join(nightly, "night.html")); !strings.Contains(string(page), "kbisect nightly: simlab: fixed") || !strings.Contains(string(page), "<svg") {
		t.Errorf("night 5: night.html lacks its title or plot")
	}

	code, hist, stderr := runCLI(t, context.Background(), "history", "--job", u.jobFile, "--db", u.db)
	if code != exitOK || !strings.Contains(hist, "<- incident 1") || !strings.Contains(hist, "incident 1: "+u.releases[k-1]+" good, "+u.releases[k]+" bad: first bad commit "+l.Tree.Regression[:12]) ||
		!strings.Contains(hist, "fixed in v6.12.99") {
		t.Errorf("history: exit %d\n%s\n%s", code, hist, stderr)
	}
	htmlFile := filepath.Join(t.TempDir(), "history.html")
	if code, _, stderr := runCLI(t, context.Background(), "history", "--job", u.jobFile, "--db", u.db, "--format", "html", "-o", htmlFile); code != exitOK {
		t.Fatalf("history --format html: %s", stderr)
	}
	page, _ := os.ReadFile(htmlFile)
	if !strings.Contains(string(page), "History at a glance") || !strings.Contains(string(page), "<svg") || !strings.Contains(string(page), "first bad release") {
		t.Errorf("the HTML history lacks its plot")
	}
}

// TestNightlyCatchesUpOnMissedNights: several tags at once, the
// regression among them: the newest is measured first, then the older
// ones down to a good one, and the range bisected is the right one.
func TestNightlyCatchesUpOnMissedNights(t *testing.T) {
	longUnderRace(t)
	l, u, k := baselineNight(t)
	u.publish(u.releases[1 : k+2]...)
	code, out, stderr := u.night()
	if code != exitRegression || out.Incident == nil || out.Incident.LastGood != u.releases[k-1] || out.Incident.FirstBad != u.releases[k] ||
		out.Incident.Commit != l.Tree.Regression {
		t.Fatalf("after missed nights: exit %d, %+v\n%s", code, out, stderr)
	}
	// The newest first, confirmed by the baseline measured again; then
	// the older ones down to a good one.
	want := fmt.Sprintf("%s good, %s bad, %s bad, %s good", u.releases[0], u.releases[k+1], u.releases[k], u.releases[k-1])
	if got := measuredTags(out); got != want {
		t.Errorf("measured %s, want %s", got, want)
	}
}

// TestNightlyFinishesWhatAStoppedNightLeft: a night that measured the
// first bad release and was stopped before it opened an incident (a
// controller rebooted) leaves only measurements; the next night, with
// nothing new, opens the incident and bisects it.
func TestNightlyFinishesWhatAStoppedNightLeft(t *testing.T) {
	longUnderRace(t)
	l, u, k := baselineNight(t)
	u.publish(u.releases[1 : k+1]...)
	// What the stopped night wrote: the first bad release and the last
	// good one, measured.
	ctx := context.Background()
	db, err := history.Open(ctx, u.db)
	if err != nil {
		t.Fatal(err)
	}
	where := history.Where{Machine: "simlab", Remote: u.bare, Branch: "linux-6.12.y"}
	for _, m := range []struct {
		tag     string
		verdict verdict.Verdict
	}{{u.releases[k], "bad"}, {u.releases[k-1], "good"}} {
		if _, err := db.AddMeasurement(ctx, where, history.Measurement{Tag: m.tag, Commit: u.tagOf[m.tag], Metric: "noise", Kind: "time",
			Values: []float64{1}, Verdict: m.verdict, Reason: "measured by the night that stopped"}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	code, out, stderr := u.night()
	if code != exitRegression || out.Result != "regression" || out.Incident == nil || out.Incident.LastGood != u.releases[k-1] ||
		out.Incident.FirstBad != u.releases[k] || out.Incident.Commit != l.Tree.Regression || !strings.Contains(stderr, "no incident was opened for it") {
		t.Fatalf("the night after: exit %d, %+v\n%s", code, out, stderr)
	}
	if len(out.Measured) != 0 {
		t.Errorf("it measured again: %+v", out.Measured)
	}
}

// TestNightlyBeginsAgainWhenTheJobChangedMidIncident: the bisection of
// an open incident was made with the job as it was; the job is edited
// (what is measured: verdict.samples) before it ends. A run would refuse
// to resume, and an unattended nightly would refuse every night: it keeps
// the old state aside, says so, and bisects again with the job as it is.
func TestNightlyBeginsAgainWhenTheJobChangedMidIncident(t *testing.T) {
	longUnderRace(t)
	l, u, k := baselineNight(t)
	u.publish(u.releases[1 : k+1]...)
	good, bad := u.releases[k-1], u.releases[k]
	// What the stopped night left: an incident opened, its state made
	// with the job as it was, no answer recorded.
	state := filepath.Join(t.TempDir(), "incident")
	u.git(filepath.Join(filepath.Dir(u.bare), "linux"), "fetch", "-q", u.bare, "refs/tags/*:refs/tags/*")
	if code, stdout, stderr := runCLI(t, context.Background(), "run", "--job", u.jobFile, "--good", good, "--bad", bad, "--state", state); code != exitOK {
		t.Fatalf("the bisection the night began: exit %d\n%s\n%s", code, stdout, stderr)
	}
	ctx := context.Background()
	db, err := history.Open(ctx, u.db)
	if err != nil {
		t.Fatal(err)
	}
	where := history.Where{Machine: "simlab", Remote: u.bare, Branch: "linux-6.12.y"}
	if _, err := db.OpenIncident(ctx, where, history.Incident{LastGood: good, FirstBadTag: bad, StateDir: state, OpenedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	u.editJob(`samples: \{min: 3, max: 5\}`, "samples: {min: 3, max: 6}")

	code, out, stderr := u.night()
	if code != exitRegression || out.Incident == nil || out.Incident.Commit != l.Tree.Regression {
		t.Fatalf("the night after the edit: exit %d, %+v\n%s", code, out, stderr)
	}
	aside, _ := filepath.Glob(state + ".job-changed-*")
	if len(aside) != 1 || !strings.Contains(stderr, "verdict.samples.max: was 5, now 6") || !strings.Contains(stderr, "its boots are kept in "+aside[0]) {
		t.Fatalf("kept aside: %v\n%s", aside, stderr)
	}
	// The old boots are kept as they were; the new state holds the job
	// as it is now.
	for dir, max := range map[string]string{aside[0]: "max: 5", state: "max: 6"} {
		job, err := os.ReadFile(filepath.Join(dir, "job.yaml"))
		if err != nil || !strings.Contains(string(job), max) {
			t.Errorf("%s/job.yaml: %v, want %q in\n%s", dir, err, max, job)
		}
	}
}

// baselineNight is a simulated lab whose first release is published and
// measured (the baseline night), with k the first bad release.
func baselineNight(t *testing.T) (*simlab.Lab, *stableUpstream, int) {
	t.Helper()
	l := simLab(t, simlab.Options{Seed: 31, Commits: 160, BrokenBuilds: -1})
	u := newStableUpstream(t, l)
	k := u.firstBad()
	u.publish(u.releases[0])
	if code, out, stderr := u.night(); code != exitOK {
		t.Fatalf("night 1: exit %d, %+v\n%s", code, out, stderr)
	}
	return l, u, k
}

// TestNightlyTellsADriftingMachineFromARegression: the machine gets
// noisier (its firmware, not its kernel): the new release measures bad,
// and so does the baseline measured again beside it. That is a drift,
// exit 4, nothing bisected; the nights after measure both again, in
// alternating rounds, until the machine is quiet again and the release is
// judged.
func TestNightlyTellsADriftingMachineFromARegression(t *testing.T) {
	l, u, _ := baselineNight(t)
	u.publish(u.releases[1]) // a good release
	l.Host.SetFloor(simhost.StormLevel + 7*time.Microsecond)
	code, out, stderr := u.night()
	want := fmt.Sprintf("%s drift, %s drift", u.releases[0], u.releases[1])
	if code != exitNotReproduced || out.Result != "drift" || out.Incident != nil || measuredTags(out) != want ||
		!strings.Contains(out.Message, "the machine is noisier, not the kernel") || strings.Contains(stderr, "bisecting") {
		t.Fatalf("the drifted night: exit %d, %+v (want %s)\n%s", code, out, want, stderr)
	}

	code, out, stderr = u.night() // nothing new, the machine as noisy
	if code != exitNotReproduced || out.Result != "drift" || measuredTags(out) != want || !strings.Contains(stderr, "alternating rounds") {
		t.Fatalf("the night after: exit %d, %+v\n%s", code, out, stderr)
	}

	l.Host.SetFloor(0) // the machine is mended
	code, out, stderr = u.night()
	want = fmt.Sprintf("%s good, %s good", u.releases[0], u.releases[1])
	if code != exitOK || out.Result != "no-regression" || measuredTags(out) != want || out.Measured[1].Baseline != u.releases[0] {
		t.Fatalf("the machine mended: exit %d, %+v (want %s)\n%s", code, out, want, stderr)
	}
	if code, out, _ := u.night(); code != exitOK || out.Result != "nothing-new" {
		t.Errorf("and then: exit %d, %+v", code, out)
	}
	db, err := history.Open(context.Background(), u.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	where := history.Where{Machine: "simlab", Remote: u.bare, Branch: "linux-6.12.y"}
	if incs, err := db.Incidents(context.Background(), where); err != nil || len(incs) != 0 {
		t.Errorf("incidents %+v, %v", incs, err)
	}
	// The baseline after the drift is the release measured good last.
	ms, err := db.Measurements(context.Background(), where)
	if err != nil || len(ms) == 0 || ms[len(ms)-1].Tag != u.releases[1] || ms[len(ms)-1].Verdict != "good" {
		t.Errorf("the history after the drift: %+v, %v; want %s measured good last", ms, err, u.releases[1])
	}
}

// TestNightlyJudgesARatioAgainstTheBaseline: with a ratio threshold the
// first release is the baseline, each new one is judged against its
// samples, and once the baseline is older than nightly.baseline_max_age
// the two are measured in alternating rounds; the regression is found
// and bisected with the same threshold.
func TestNightlyJudgesARatioAgainstTheBaseline(t *testing.T) {
	longUnderRace(t)
	l := simLab(t, simlab.Options{Seed: 31, Commits: 160, BrokenBuilds: -1})
	u := newStableUpstream(t, l)
	k := u.firstBad()
	u.publish(u.releases[0])
	u.editJob(`(?m)^  threshold: \S+`, "  threshold: 3x")
	code, out, stderr := u.night()
	if code != exitOK || measuredTags(out) != u.releases[0]+" good" || !strings.Contains(out.Measured[0].Reason, "the baseline") {
		t.Fatalf("night 1: exit %d, %+v\n%s", code, out, stderr)
	}

	u.publish(u.releases[1 : k-1]...)
	code, out, stderr = u.night()
	if code != exitOK || measuredTags(out) != u.releases[k-2]+" good" || out.Measured[0].Baseline != u.releases[0] {
		t.Fatalf("night 2: exit %d, %+v\n%s", code, out, stderr)
	}

	u.editJob(`$`, "\nnightly:\n  baseline_max_age: 0s\n  rounds: 2\n")
	u.publish(u.releases[k-1 : k+1]...)
	code, out, stderr = u.night()
	want := fmt.Sprintf("%s good, %s bad, %s good", u.releases[k-2], u.releases[k], u.releases[k-1])
	if code != exitRegression || measuredTags(out) != want || out.Measured[1].Baseline != u.releases[k-2] ||
		!strings.Contains(stderr, "in 2 alternating rounds") || out.Incident == nil || out.Incident.LastGood != u.releases[k-1] ||
		out.Incident.Commit != l.Tree.Regression {
		t.Fatalf("night 3: exit %d, %+v (want %s)\n%s", code, out, want, stderr)
	}
}
