package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/internal/testrepo"
	"kbisect/report"
)

// fixture is a generated merge-heavy history in a real work tree whose
// commits say in a file whether they are good or bad.
type fixture struct {
	dir       string
	hashes    []string
	culprit   string
	bad, good string
	script    string // judges the checked-out commit: exit 0 good, 1 bad
	calls     string // file the script appends each tested commit to
}

func newFixture(t *testing.T, seed int64) *fixture {
	t.Helper()
	h := testrepo.Generate(seed, testrepo.Shape{Commits: 300, Subsystems: 3, Octopus: true, CrissCross: true, TiePercent: 10})
	dir := t.TempDir()
	hashes, culprit, err := h.Regression(dir, func(i int) map[string]string { return map[string]string{"id": fmt.Sprintf("c%d", i)} })
	if err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(t.TempDir(), "calls")
	return &fixture{
		dir: dir, hashes: hashes, culprit: hashes[culprit],
		bad: hashes[h.Mainline], good: hashes[0],
		script: fmt.Sprintf(`echo "$KBISECT_COMMIT" >> %s; grep -q good state`, calls),
		calls:  calls,
	}
}

func (f *fixture) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = f.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (f *fixture) tested(t *testing.T) []string {
	data, err := os.ReadFile(f.calls)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(string(data))
}

// gitBisectTested runs the real git bisect run on the fixture and returns
// the commits it tested, to compare with kbisect's.
func (f *fixture) gitBisectTested(t *testing.T) []string {
	t.Helper()
	log := filepath.Join(t.TempDir(), "git-calls")
	f.git(t, "bisect", "start", f.bad, f.good)
	f.git(t, "bisect", "run", "sh", "-c", fmt.Sprintf(`git rev-parse HEAD >> %s; grep -q good state`, log))
	f.git(t, "bisect", "reset")
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(data))
}

func runCLI(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runKbisect(ctx, append([]string{"kbisect"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestRunExecFindsFirstBadCommitLikeGitAndKeepsTheTree(t *testing.T) {
	f := newFixture(t, 1)
	// Untracked and ignored files must survive every checkout.
	if err := os.WriteFile(filepath.Join(f.dir, "notes.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, ".git", "info", "exclude"), []byte(".config\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, ".config"), []byte("CONFIG_PREEMPT_RT=y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := f.gitBisectTested(t)

	code, stdout, stderr := runCLI(t, context.Background(), "run", "--repo", f.dir, "--good", f.good, "--bad", f.bad, "--exec", f.script)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.HasPrefix(stdout, f.culprit+" is the first bad commit\n") {
		t.Fatalf("stdout does not name the culprit %s:\n%s", f.culprit, stdout)
	}
	if !strings.Contains(stdout, "Author: Test Author <author@example.org>") {
		t.Errorf("no author in:\n%s", stdout)
	}
	if got := f.tested(t); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("tested\n got %v\nwant %v (git bisect run)", got, want)
	}
	if head := f.git(t, "symbolic-ref", "HEAD"); head != "refs/heads/master" {
		t.Errorf("HEAD is %s after the run, want refs/heads/master", head)
	}
	for name, content := range map[string]string{"notes.txt": "mine\n", ".config": "CONFIG_PREEMPT_RT=y\n"} {
		data, err := os.ReadFile(filepath.Join(f.dir, name))
		if err != nil || string(data) != content {
			t.Errorf("%s after the run: %q, %v", name, data, err)
		}
	}
	if !strings.Contains(stderr, "Bisecting: ") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}
}

func TestRunJSONFollowsTheContract(t *testing.T) {
	f := newFixture(t, 2)
	state := filepath.Join(t.TempDir(), "state")
	code, stdout, stderr := runCLI(t, context.Background(), "run", "--repo", f.dir, "--good", f.good, "--bad", f.bad,
		"--exec", f.script, "--state", state, "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	tested := f.tested(t)
	if got.Result != "found" || got.FirstBad != f.culprit || len(got.Candidates) != 1 || got.Candidates[0] != f.culprit {
		t.Errorf("result %q first_bad %s candidates %v, want found %s", got.Result, got.FirstBad, got.Candidates, f.culprit)
	}
	if got.Steps != len(tested) || len(got.Tested) != len(tested) {
		t.Errorf("steps %d, tested %d entries; the script ran %d times", got.Steps, len(got.Tested), len(tested))
	}
	for i, tc := range got.Tested {
		if tc.Commit != tested[i] || (tc.Verdict != "good" && tc.Verdict != "bad") {
			t.Errorf("tested[%d] = %+v, script saw %s", i, tc, tested[i])
		}
	}
	if got.StateDir != state {
		t.Errorf("state_dir %q, want %q", got.StateDir, state)
	}
	if _, err := os.Stat(filepath.Join(state, "git-bisect.log")); err != nil {
		t.Error(err)
	}
}

func TestRunRefusesUncommittedChanges(t *testing.T) {
	f := newFixture(t, 3)
	if err := os.WriteFile(filepath.Join(f.dir, "id"), []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := f.git(t, "rev-parse", "HEAD")
	code, _, stderr := runCLI(t, context.Background(), "run", "--repo", f.dir, "--good", f.good, "--bad", f.bad, "--exec", f.script)
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	if !strings.Contains(stderr, "uncommitted changes") || !strings.Contains(stderr, "id") || !strings.Contains(stderr, "git stash") {
		t.Errorf("message does not say what and what to do:\n%s", stderr)
	}
	if len(f.tested(t)) != 0 {
		t.Error("the test command ran on a dirty tree")
	}
	if data, _ := os.ReadFile(filepath.Join(f.dir, "id")); string(data) != "edited\n" {
		t.Errorf("the user's change was touched: %q", data)
	}
	if after := f.git(t, "rev-parse", "HEAD"); after != before {
		t.Errorf("HEAD moved from %s to %s", before, after)
	}
}

func TestRunUsageErrorsSayWhere(t *testing.T) {
	f := newFixture(t, 4)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--repo", f.dir, "--good", f.good, "--bad", "no-such-tag", "--exec", "true"}, `--bad no-such-tag`},
		{[]string{"run", "--repo", f.dir, "--good", "c1~999", "--bad", f.bad, "--exec", "true"}, `--good c1~999`},
		{[]string{"run", "--repo", f.dir, "--good", f.good, "--bad", f.bad}, "give --job FILE (bisect kernels on a lab machine) or --exec CMD"},
		{[]string{"run", "--repo", f.dir, "--bad", f.bad, "--exec", "true"}, "at least one --good"},
		{[]string{"run", "--no-such-flag"}, "no-such-flag"},
		{[]string{"run", "--repo", t.TempDir(), "--good", "a", "--bad", "b", "--exec", "true"}, "not inside a git work tree"},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(t, context.Background(), c.args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", c.args, code, exitUsage, stderr)
		}
		if !strings.Contains(stderr, c.want) {
			t.Errorf("%v: stderr %q does not mention %q", c.args, stderr, c.want)
		}
		if strings.Contains(stderr, "goroutine ") {
			t.Errorf("%v: a Go stack trace reached the user", c.args)
		}
	}
}

func TestRunReplaysAGitBisectLogAndGitReplaysOurs(t *testing.T) {
	f := newFixture(t, 6)
	want := f.gitBisectTested(t)
	if len(want) < 4 {
		t.Fatalf("history too small: git tested %d commits", len(want))
	}
	// Start by hand with git: two verdicts, then the log.
	f.git(t, "bisect", "start", f.bad, f.good)
	for _, sha := range want[:2] {
		verdict := "bad"
		if strings.Contains(f.git(t, "show", sha+":state"), "good") {
			verdict = "good"
		}
		f.git(t, "bisect", verdict, sha)
	}
	gitLog := filepath.Join(t.TempDir(), "git.log")
	if err := os.WriteFile(gitLog, []byte(f.git(t, "bisect", "log")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.git(t, "bisect", "reset")

	state := filepath.Join(t.TempDir(), "state")
	code, stdout, stderr := runCLI(t, context.Background(), "run", "--repo", f.dir, "--replay", gitLog, "--exec", f.script, "--state", state)
	if code != exitOK || !strings.HasPrefix(stdout, f.culprit+" is the first bad commit") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if got := f.tested(t); strings.Join(got, " ") != strings.Join(want[2:], " ") {
		t.Errorf("after the replay kbisect tested\n %v\nwant the rest of git's\n %v", got, want[2:])
	}

	// And git takes our log back.
	out := f.git(t, "bisect", "replay", filepath.Join(state, "git-bisect.log"))
	f.git(t, "bisect", "reset")
	if !strings.Contains(out, f.culprit+" is the first bad commit") {
		t.Errorf("git bisect replay of kbisect's log did not end on the culprit:\n%s", out)
	}
}

func forkRepo(t *testing.T) (*fixture, map[string]string) {
	t.Helper()
	f := &fixture{dir: t.TempDir(), calls: filepath.Join(t.TempDir(), "calls")}
	f.script = fmt.Sprintf(`echo "$KBISECT_COMMIT" >> %s; grep -q good state`, f.calls)
	ids := map[string]string{}
	commit := func(name, state string) {
		os.WriteFile(filepath.Join(f.dir, "state"), []byte(state+"\n"), 0o644)
		f.git(t, "add", "state")
		f.git(t, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", name)
		ids[name] = f.git(t, "rev-parse", "HEAD")
	}
	f.git(t, "init", "-q", "-b", "master")
	commit("A", "good")
	commit("X", "bad")
	f.git(t, "checkout", "-q", "-b", "fixed")
	commit("G", "good")
	f.git(t, "checkout", "-q", "master")
	commit("M", "bad")
	return f, ids
}

func TestRunSaysWhenTheMergeBaseIsBad(t *testing.T) {
	f, ids := forkRepo(t)
	code, stdout, stderr := runCLI(t, context.Background(), "run", "--repo", f.dir, "--good", "fixed", "--bad", "master", "--exec", f.script)
	if code != exitNotReproduced {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, exitNotReproduced, stdout, stderr)
	}
	if !strings.Contains(stdout, "merge base "+ids["X"]+" is bad") || !strings.Contains(stdout, "fixed between") {
		t.Errorf("stdout does not explain:\n%s", stdout)
	}
	if got := f.tested(t); len(got) != 1 || got[0] != ids["X"] {
		t.Errorf("tested %v, want only the merge base %s", got, ids["X"])
	}
	if !strings.Contains(stderr, "a merge base must be tested") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

func TestRunSaysWhenGoodAndBadAreSwapped(t *testing.T) {
	f, _ := forkRepo(t)
	code, stdout, _ := runCLI(t, context.Background(), "run", "--repo", f.dir, "--good", "master", "--bad", "master~2", "--exec", f.script, "--json")
	if code != exitNotReproduced {
		t.Fatalf("exit %d, want %d", code, exitNotReproduced)
	}
	var got report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got.Result != "not-reproduced" || !strings.Contains(got.Reason, "swapped") || len(f.tested(t)) != 0 {
		t.Errorf("result %q reason %q tested %v", got.Result, got.Reason, f.tested(t))
	}
}

func TestRunAbortsOnExitAbove127AndSaysSoInJSON(t *testing.T) {
	f := newFixture(t, 8)
	code, stdout, _ := runCLI(t, context.Background(), "run", "--repo", f.dir, "--good", f.good, "--bad", f.bad, "--exec", "exit 200", "--json")
	if code != exitFailure {
		t.Fatalf("exit %d, want %d", code, exitFailure)
	}
	var got report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if got.Result != "aborted" || !strings.Contains(got.Error, "exited 200") || len(got.Tested) != 0 {
		t.Errorf("%+v", got)
	}
	if head := f.git(t, "symbolic-ref", "HEAD"); head != "refs/heads/master" {
		t.Errorf("HEAD is %s after an abort", head)
	}
}

func TestRunRefusesAStateDirOfAnotherRange(t *testing.T) {
	f := newFixture(t, 9)
	state := filepath.Join(t.TempDir(), "state")
	if code, _, stderr := runCLI(t, context.Background(), "run", "--repo", f.dir, "--good", f.good, "--bad", f.bad, "--exec", f.script, "--state", state); code != exitOK {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	code, _, stderr := runCLI(t, context.Background(), "run", "--repo", f.dir, "--good", f.good, "--bad", f.bad+"~1", "--exec", f.script, "--state", state)
	if code != exitUsage || !strings.Contains(stderr, "holds another bisection") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

func TestRunRefusesToStartDuringAGitBisect(t *testing.T) {
	f := newFixture(t, 10)
	f.git(t, "bisect", "start", f.bad, f.good)
	code, _, stderr := runCLI(t, context.Background(), "run", "--repo", f.dir, "--good", f.good, "--bad", f.bad, "--exec", f.script)
	if code != exitFailure || !strings.Contains(stderr, "git bisect reset") || len(f.tested(t)) != 0 {
		t.Errorf("exit %d, tested %d: %s", code, len(f.tested(t)), stderr)
	}
}

// TestRunReadsAReplayedLogAsGitDoes: git checks that the good revisions
// bound the range when a replayed log starts, not after its verdicts; a
// verdict that moves the bad end before the merge of a good branch must
// not make kbisect test a merge base git would not.
func TestRunReadsAReplayedLogAsGitDoes(t *testing.T) {
	f := &fixture{dir: t.TempDir(), calls: filepath.Join(t.TempDir(), "calls")}
	f.script = fmt.Sprintf(`echo "$KBISECT_COMMIT" >> %s; grep -q good state`, f.calls)
	commit := func(state, msg string) string {
		os.WriteFile(filepath.Join(f.dir, "state"), []byte(state+"\n"), 0o644)
		f.git(t, "add", "state")
		f.git(t, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", msg)
		return f.git(t, "rev-parse", "HEAD")
	}
	f.git(t, "init", "-q", "-b", "master")
	commit("good", "A")
	f.git(t, "checkout", "-q", "-b", "side")
	s1 := commit("good", "S1")
	f.git(t, "checkout", "-q", "master")
	commit("good", "B1")
	b2 := commit("bad", "B2")
	commit("bad", "B3")
	f.git(t, "-c", "user.name=T", "-c", "user.email=t@e", "merge", "-q", "--no-ff", "-m", "merge side", "side")
	commit("bad", "D")

	log := filepath.Join(t.TempDir(), "replay.log")
	os.WriteFile(log, []byte("git bisect start 'master' '"+s1+"'\ngit bisect bad "+b2+"\n"), 0o644)

	// git: replay, then run.
	gitCalls := filepath.Join(t.TempDir(), "git-calls")
	f.git(t, "bisect", "replay", log)
	f.git(t, "bisect", "run", "sh", "-c", fmt.Sprintf(`git rev-parse HEAD >> %s; grep -q good state`, gitCalls))
	gitOut := f.git(t, "bisect", "log")
	f.git(t, "bisect", "reset")
	want, _ := os.ReadFile(gitCalls)

	code, stdout, stderr := runCLI(t, context.Background(), "run", "--repo", f.dir, "--replay", log, "--exec", f.script)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if got := f.tested(t); strings.Join(got, " ") != strings.Join(strings.Fields(string(want)), " ") {
		t.Errorf("tested %v, git tested %v", got, strings.Fields(string(want)))
	}
	first := strings.Fields(stdout)[0]
	if !strings.Contains(gitOut, "# first bad commit: ["+first+"]") {
		t.Errorf("kbisect found %s; git:\n%s", first, gitOut)
	}
}

func TestUnknownCommandIsAUsageError(t *testing.T) {
	code, _, stderr := runCLI(t, context.Background(), "bisekt")
	if code != exitUsage || !strings.Contains(stderr, `unknown command "bisekt"`) {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

func buildKbisect(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kbisect-bin")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "kbisect")
		if out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func TestRunStartsAfreshWhenTheReplayedLogChanges(t *testing.T) {
	f := newFixture(t, 13)
	want := f.gitBisectTested(t)
	wrong := want[0] // mark git's first test with the opposite verdict
	verdict := "good"
	if strings.Contains(f.git(t, "show", wrong+":state"), "good") {
		verdict = "bad"
	}
	log := filepath.Join(t.TempDir(), "replay.log")
	base := "git bisect start '" + f.bad + "' '" + f.good + "'\n"
	os.WriteFile(log, []byte(base+"git bisect "+verdict+" "+wrong+"\n"), 0o644)
	code, stdout, _ := runCLI(t, context.Background(), "run", "--repo", f.dir, "--replay", log, "--exec", f.script)
	if code != exitOK || strings.HasPrefix(stdout, f.culprit) {
		t.Fatalf("with a wrong verdict the run should end elsewhere: exit %d\n%s", code, stdout)
	}
	// The user fixes the log, as git's manual suggests, and runs again.
	os.WriteFile(log, []byte(base), 0o644)
	code, stdout, stderr := runCLI(t, context.Background(), "run", "--repo", f.dir, "--replay", log, "--exec", f.script)
	if code != exitOK || !strings.HasPrefix(stdout, f.culprit+" is the first bad commit") || strings.Contains(stderr, "resuming") {
		t.Errorf("after fixing the log: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

func TestRunJSONUsageErrorsStillPrintJSON(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--json", "--bogus"},
		{"run", "--json", "--good", "a", "--bad", "b", "--exec", "true", "extra"},
		{"run", "--json", "--repo", t.TempDir(), "--good", "a", "--bad", "b", "--exec", "true"},
	} {
		code, stdout, _ := runCLI(t, context.Background(), args...)
		var got report.RunJSON
		if err := json.Unmarshal([]byte(stdout), &got); err != nil || got.Result != "aborted" || got.Error == "" || code != exitUsage {
			t.Errorf("%v: exit %d, stdout %q (%v)", args, code, stdout, err)
		}
	}
}

// TestRunReplaysABareStartAsGitDoes: a log whose range comes as verdicts
// after an empty "git bisect start" is checked after them, so a good
// revision off the bad one's history makes its merge base tested first.
func TestRunReplaysABareStartAsGitDoes(t *testing.T) {
	f, ids := forkRepo(t)
	// master: A-X-M (X bad); fixed: X-G. A good revision off master, from A.
	f.git(t, "checkout", "-q", "-b", "old", ids["A"])
	os.WriteFile(filepath.Join(f.dir, "state"), []byte("good\n"), 0o644)
	f.git(t, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-am", "O")
	o := f.git(t, "rev-parse", "HEAD")
	f.git(t, "checkout", "-q", "master")
	log := filepath.Join(t.TempDir(), "replay.log")
	os.WriteFile(log, []byte("git bisect start\ngit bisect bad "+ids["M"]+"\ngit bisect good "+o+"\n"), 0o644)

	gitCalls := filepath.Join(t.TempDir(), "git-calls")
	f.git(t, "bisect", "replay", log)
	f.git(t, "bisect", "run", "sh", "-c", fmt.Sprintf(`git rev-parse HEAD >> %s; grep -q good state`, gitCalls))
	f.git(t, "bisect", "reset")
	want, _ := os.ReadFile(gitCalls)

	code, stdout, stderr := runCLI(t, context.Background(), "run", "--repo", f.dir, "--replay", log, "--exec", f.script)
	if code != exitOK || !strings.HasPrefix(stdout, ids["X"]+" is the first bad commit") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if got := f.tested(t); strings.Join(got, " ") != strings.Join(strings.Fields(string(want)), " ") {
		t.Errorf("tested %v, git tested %v", got, strings.Fields(string(want)))
	}
	if !strings.Contains(stderr, "a merge base must be tested") {
		t.Errorf("no merge base was tested:\n%s", stderr)
	}
}

// skewedHistory builds a history whose committer dates go backwards (Z1,
// Z2 are older than their parent X): git's walk then depends on what its
// process has parsed, and git bisect start and git bisect run are two
// processes.
const skewedHistory = `set -e
export GIT_AUTHOR_NAME=T GIT_AUTHOR_EMAIL=t@e GIT_COMMITTER_NAME=T GIT_COMMITTER_EMAIL=t@e
git init -q -b master .
E=4b825dc642cb6eb9a060e54bf8d69288fbee4904
mk() { msg=$1; d=$2; shift 2; a=""; for p in "$@"; do a="$a -p $p"; done
  GIT_COMMITTER_DATE="@$((1700000000+d)) +0000" GIT_AUTHOR_DATE="@$((1700000000+d)) +0000" git commit-tree $E -m "$msg" $a; }
A=""; for i in 0 1 2 3 4 5 6 7 8 9; do if [ -z "$A" ]; then A=$(mk A$i $((100+10*i))); else A=$(mk A$i $((100+10*i)) $A); fi; done
X=$(mk X 300 $A); Z2=$(mk Z2 40 $X); Z1=$(mk Z1 50 $Z2); G=$(mk G 1000 $Z1)
p=$A; for i in 1 2 3 4 5; do p=$(mk P$i $((300+100*i)) $p); done
M=$(mk M 1100 $p $G); B1=$(mk B1 1200 $M); B2=$(mk B2 1250 $B1); B3=$(mk B3 1300 $B2); B4=$(mk B4 1400 $B3)
S1=$(mk S1 1450 $X); N=$(mk N 1500 $B4 $S1); p=$N
for i in 5 6 7 8 9 10; do p=$(mk B$i $((1500+10*i)) $p); done
git update-ref refs/heads/master $p; git reset -q --hard; git tag good $G
`

func TestRunTestsWhatGitTestsOnSkewedDates(t *testing.T) {
	dir := t.TempDir()
	build := exec.Command("sh", "-c", skewedHistory)
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	f := &fixture{dir: dir, calls: filepath.Join(t.TempDir(), "calls")}
	judge := `s=$(git log -1 --format=%s); case $s in B5|B6|B7|B8|B9|B10) exit 1;; esac; exit 0`
	gitCalls := filepath.Join(t.TempDir(), "git-calls")
	f.git(t, "bisect", "start", "master", "good")
	f.git(t, "bisect", "run", "sh", "-c", "git rev-parse HEAD >> "+gitCalls+"; "+judge)
	f.git(t, "bisect", "reset")
	want, _ := os.ReadFile(gitCalls)
	code, stdout, stderr := runCLI(t, context.Background(), "run", "--repo", dir, "--good", "good", "--bad", "master",
		"--exec", `echo "$KBISECT_COMMIT" >> `+f.calls+"; "+judge)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if got := f.tested(t); strings.Join(got, " ") != strings.Join(strings.Fields(string(want)), " ") {
		t.Errorf("tested %v, git bisect run tested %v", got, strings.Fields(string(want)))
	}
}

func TestHelpCommandShowsTheManual(t *testing.T) {
	code, stdout, stderr := runCLI(t, context.Background(), "help", "run")
	if code != exitOK || !strings.Contains(stdout, "kbisect run - bisect a range") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestRunExecInASparseCheckoutAndALinkedWorktree: kernel trees are often
// sparse (extensions.worktreeConfig, which go-git alone refuses) or
// worktrees of one clone; both bisect as git bisect run does.
func TestRunExecInASparseCheckoutAndALinkedWorktree(t *testing.T) {
	f := newFixture(t, 17)
	want := f.gitBisectTested(t)
	f.git(t, "sparse-checkout", "set", "--no-cone", "/*")
	if v := f.git(t, "config", "extensions.worktreeConfig"); v != "true" {
		t.Fatalf("sparse-checkout did not set extensions.worktreeConfig: %q", v)
	}
	linked := filepath.Join(t.TempDir(), "linked")
	f.git(t, "worktree", "add", "-q", "--detach", linked, f.bad)
	for _, repo := range []string{f.dir, linked} {
		os.Remove(f.calls)
		code, stdout, stderr := runCLI(t, context.Background(), "run", "--repo", repo, "--good", f.good, "--bad", f.bad, "--exec", f.script)
		if code != exitOK || !strings.HasPrefix(stdout, f.culprit+" is the first bad commit") {
			t.Fatalf("in %s: exit %d\n%s\n%s", repo, code, stdout, stderr)
		}
		if got := f.tested(t); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("in %s, tested\n %v\ngit bisect run tested\n %v", repo, got, want)
		}
	}
}
