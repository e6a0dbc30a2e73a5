package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"kbisect/bisect"
	"kbisect/internal/simlab"
	"kbisect/report"
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
	for _, s := range []string{want[:12] + " is the first bad commit, probability ", "confirmed on fresh boots of it, its parents and the bad endpoint without it",
		"Tested kernels, oldest first (noise: the median of the boots' medians", "bad* ", "good* ", "A: last good ", "B: first bad " + want[:12],
		"Measuring the bad endpoint with " + want[:12] + " reverted, confirming", "calibrating on the endpoints, boot by boot"} {
		if !strings.Contains(strings.Join(strings.Fields(stdout+stderr), " "), s) { // prose is folded at 72 columns
			t.Errorf("the output lacks %q:\n%s\n%s", s, stdout, stderr)
		}
	}

	// Every step's line, off a terminal, says where the search expects
	// to end: the boots left and when the answer comes.
	if steps := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d Measuring [^\n]*; ~\d+ boots? left( \(\d+–\d+\))?, answer in [^\n]* \([^\n]* – [^\n]*\)$`).FindAllString(stderr, -1); len(steps) < 5 {
		t.Errorf("%d steps said where the search expects to end:\n%s", len(steps), stderr)
	}

	// Prose keeps to a mail's 72 columns (the per-CPU tables keep the
	// seed report's layout).
	for _, line := range strings.Split(stdout, "\n") {
		if n := len([]rune(line)); n > 72 && !strings.HasPrefix(line, "  [") && !strings.HasPrefix(line, "    CPU") && len(strings.Fields(line)) > 1 {
			t.Errorf("a line of %d columns: %q", n, line)
		}
	}

	// Again: everything comes from the state directory, even with the
	// lab gone (no preflight for a run that has its answer).
	l.Host.Close()
	code, again, stderr := runCLI(t, context.Background(), append(args, "--json")...)
	var out report.RunJSON
	if err := json.Unmarshal([]byte(again), &out); err != nil || code != exitOK {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, again, stderr)
	}
	if out.Result != "found" || out.FirstBad != want || out.Posterior == nil || out.Posterior.Probability < 0.99 || !strings.Contains(stderr, "resuming from") {
		t.Errorf("second run: %+v\n%s", out, stderr)
	}
	for _, tc := range out.Tested {
		if tc.Metric == nil || (tc.Verdict != "skip" && len(tc.Metric.Values) == 0) {
			t.Errorf("tested %s %s without its numbers: %+v", tc.Commit, tc.Verdict, tc.Metric)
		}
	}

	// git-bisect.log holds the commits the evidence decided, and git
	// replays it to the same commit.
	replay := exec.Command("git", "-C", l.Tree.Dir, "bisect", "replay", filepath.Join(state, "git-bisect.log"))
	if out, err := replay.CombinedOutput(); err != nil || !strings.Contains(string(out), want+" is the first bad commit") {
		t.Errorf("git bisect replay: %v\n%s", err, out)
	}
	_ = exec.Command("git", "-C", l.Tree.Dir, "bisect", "reset").Run()

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

// TestRunJobResumesAfterKill9AtEveryPhase kills kbisect (SIGKILL, no
// chance to clean up) when it reaches each phase — calibration, a build,
// a boot, a sample, the confirmation — and runs the same command again:
// the run resumes from what was kept, tests no commit twice, and finds
// the planted regression.
func TestRunJobResumesAfterKill9AtEveryPhase(t *testing.T) {
	bin := buildKbisect(t)
	l := simLab(t, simlab.Options{Seed: 6, Commits: 80})
	for _, at := range []struct {
		what string
		nth  int
	}{
		{"calibrating on the endpoints", 1}, // nothing kept yet
		{" boot\n", 2},                      // the good endpoint's: the bad one's evidence is kept
		{"sample 2:", 4},                    // in the middle of the first step's samples
		{" build\n", 5},                     // a later step's build
		{"confirming ", 1},                  // the answer is known, not yet confirmed
	} {
		t.Run(strings.TrimSpace(at.what), func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			args := []string{"run", "--job", l.JobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", state}
			seen := killAt(t, bin, args, at.what, at.nth)
			code, out, errText := runCLI(t, context.Background(), args...)
			if code != exitOK || !strings.HasPrefix(out, l.Tree.Expected.FirstBad+" is the first bad commit") {
				t.Fatalf("killed after %q; the next run: exit %d\n%s\n%s", seen, code, out, errText)
			}
			tested := map[string]bool{}
			records, err := bisect.ReadState(state)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range records {
				if r.Event == bisect.EventVerdict {
					if tested[r.Commit] {
						t.Errorf("%s tested twice", r.Commit)
					}
					tested[r.Commit] = true
				}
			}
		})
	}
}

// killAt runs kbisect and kills it with SIGKILL the nth time its stderr
// shows what; it returns the output so far.
func killAt(t *testing.T, bin string, args []string, what string, nth int) string {
	t.Helper()
	seen, _ := signalAt(t, bin, args, what, nth, syscall.SIGKILL)
	return seen
}

// signalAt runs kbisect, sends it sig the nth time its stderr shows what,
// and returns its stderr and exit code.
func signalAt(t *testing.T, bin string, args []string, what string, nth int, sig syscall.Signal) (string, int) {
	t.Helper()
	c := exec.Command(bin, args...)
	stderr, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	buf := make([]byte, 4096)
	killed := false
	for {
		n, err := stderr.Read(buf)
		seen.Write(buf[:n])
		if !killed && strings.Count(seen.String(), what) >= nth {
			_ = c.Process.Signal(sig)
			killed = true
			if sig == syscall.SIGKILL {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = c.Wait()
	if !killed {
		t.Fatalf("kbisect ended before %q came %d times:\n%s", what, nth, seen.String())
	}
	return seen.String(), c.ProcessState.ExitCode()
}

// An interrupted run says the command that resumes it; kbisect report
// says it stopped and is not running, with that command, and where the
// search stood and expected to end; the command then finds the answer.
func TestAnInterruptedRunSaysHowToResumeIt(t *testing.T) {
	bin := buildKbisect(t)
	l := simLab(t, simlab.Options{Seed: 6, Commits: 80})
	state := filepath.Join(t.TempDir(), "state")
	args := []string{"run", "--job", l.JobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", state}
	seen, code := signalAt(t, bin, args, "Measuring ", 3, syscall.SIGINT)
	resume := strings.Join(append([]string{bin}, args...), " ")
	if code != exitInterrupted || !strings.Contains(seen, "kbisect: nothing measured is lost: the state is in "+state+"; the same command resumes it:\n  "+resume+"\n") {
		t.Fatalf("interrupted: exit %d\n%s", code, seen)
	}
	code, out, errText := runCLI(t, context.Background(), "report", "--state", state)
	if code != exitOK || !strings.Contains(out, ", not running: no answer yet; resume it with: "+resume+"\n") {
		t.Fatalf("report on the stopped run: exit %d\n%s\n%s", code, out, errText)
	}
	if folded := strings.Join(strings.Fields(out), " "); !regexp.MustCompile(`After \d+ boots \(and \d+ of the endpoints, which taught the model\), leading: [0-9a-f]{12} [0-9.]+.* As its last step began \(\d\d:\d\d [A-Z]+\) the search expected ~\d+ boots? left.*, answer in `).MatchString(folded) {
		t.Errorf("the report of a run stopped mid-search does not say where it stood and expected to end:\n%s", out)
	}
	got, err := exec.Command("sh", "-c", resume).Output()
	if !strings.HasPrefix(string(got), l.Tree.Expected.FirstBad+" is the first bad commit") {
		t.Errorf("the command it gave: %v\n%s", err, got)
	}
}

func countTested(t *testing.T, state string) int {
	t.Helper()
	records, err := bisect.ReadState(state)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range records {
		if r.Event == bisect.EventVerdict {
			n++
		}
	}
	return n
}

// TestRunJobIsInconclusiveWhenABrokenBuildHidesTheRegression: the
// regression's parent does not build, so no test tells the two apart:
// exit 3 with both as candidates, as git bisect's "could be any of".
func TestRunJobIsInconclusiveWhenABrokenBuildHidesTheRegression(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 12, Commits: 110, BrokenBeforeRegression: true, Regression: simlab.OnTopic})
	code, stdout, stderr := runCLI(t, context.Background(), "run", "--job", l.JobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad,
		"--state", filepath.Join(t.TempDir(), "state"), "--json")
	var out report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitInconclusive {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	got := append([]string(nil), out.Candidates...)
	slices.Sort(got)
	want := slices.Sorted(slices.Values(l.Tree.Expected.Candidates))
	if out.Result != "inconclusive" || !slices.Equal(got, want) {
		t.Errorf("result %s, candidates %v, want %v", out.Result, got, want)
	}
	for _, tc := range out.Tested {
		if tc.Verdict == "skip" && (tc.Metric == nil || !strings.HasPrefix(tc.Metric.Reason, "does not build: ")) {
			t.Errorf("skipped %s: %+v", tc.Commit, tc.Metric)
		}
	}
}

// TestRunJobOnThreeIdenticalMachines: three job files naming identical
// machines bisect together and find what one finds; job files that
// describe different machines are refused.
var timestamped = regexp.MustCompile(`^(\d\d:\d\d:\d\d |\[[0-9a-f]{40}\] )`) // or git's second line of a step

func TestRunJobOnThreeIdenticalMachines(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 2})
	args := []string{"run", "-v", "--job", l.JobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", filepath.Join(t.TempDir(), "state")}
	for i := 0; i < 2; i++ {
		file, _, err := l.AddHost()
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "--job", file)
	}
	code, stdout, stderr := runCLI(t, context.Background(), args...)
	if code != exitOK || !strings.HasPrefix(stdout, l.Tree.Expected.FirstBad+" is the first bad commit") ||
		!strings.Contains(stderr, "simlab-2: ") || !strings.Contains(stderr, "simlab-3: ") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	// -v: the commands, here and on each host, as whole lines among the
	// others although three machines work at once.
	for _, want := range []string{"+ make -C ", " bzImage modules\n", "+ git -C ", " checkout -q --detach ",
		"+ root@127.0.0.1:", ": # kbisect:kexec 6.12.", "\n    out=$(LC_ALL=C kexec -l /boot/vmlinuz-6.12.", ": # kbisect:osnoise"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("-v did not show %q", want)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if !strings.HasPrefix(line, "    ") && !timestamped.MatchString(line) {
			t.Errorf("a line neither timestamped nor a script's continuation: %q", line)
			break
		}
	}
	// A machine whose test was stopped for a more useful one may be
	// mid-reboot: the next test waits for it, the lab has not failed.
	if strings.Contains(stderr, "retrying in") {
		t.Errorf("a lab failure among machines that never fail:\n%s", stderr)
	}
	for i, h := range l.Hosts {
		if len(h.Boots()) == 0 {
			t.Errorf("machine %d never booted a kernel", i+2)
		}
	}

	other := filepath.Join(t.TempDir(), "other.yaml")
	b, err := os.ReadFile(l.JobFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte(strings.Replace(string(b), "samples: {min: 3, max: 5}", "samples: {min: 4, max: 5}", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, context.Background(), "run", "--job", l.JobFile, "--job", other, "--good", l.Tree.Good, "--bad", l.Tree.Bad)
	if code != exitUsage || !strings.Contains(stderr, "verdict differs; several job files must describe identical machines") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// TestRunJobFirstParentNamesTheMergeAndSaysSo: with --first-parent a
// regression made on a topic branch is found as the merge that brought it
// in; the result says the culprit is a merge, confirmed against its first
// parent.
func TestRunJobFirstParentNamesTheMergeAndSaysSo(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 5, Commits: 120, Regression: simlab.OnTopic})
	out, err := exec.Command("git", "-C", l.Tree.Dir, "rev-list", "--first-parent", "--reverse", l.Tree.Good+".."+l.Tree.Bad).Output()
	if err != nil {
		t.Fatal(err)
	}
	merge := ""
	for _, c := range strings.Fields(string(out)) {
		if l.Tree.IsBad(c) {
			merge = c
			break
		}
	}
	if merge == "" || merge == l.Tree.Expected.FirstBad {
		t.Fatalf("no merge brings the regression %s into the mainline (%q)", l.Tree.Expected.FirstBad, merge)
	}
	code, stdout, stderr := runCLI(t, context.Background(), "run", "--first-parent", "--job", l.JobFile,
		"--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", filepath.Join(t.TempDir(), "state"), "--json")
	var res report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != exitOK {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	if res.FirstBad != merge || res.Posterior == nil || res.Posterior.Probability < 0.99 {
		t.Errorf("first bad %s (posterior %+v), want the merge %s", res.FirstBad, res.Posterior, merge)
	}
	if !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "is a merge of 2 parents") }) {
		t.Errorf("no warning says the culprit is a merge: %q", res.Warnings)
	}
}
