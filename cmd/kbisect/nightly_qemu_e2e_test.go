package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kbisect/nightly"
)

// TestQEMUNightlyOnARealSeries is nightly end to end on real kernels:
// the e2e series on Debian's linux-source-6.12 gets release tags night
// by night, and a local QEMU guest measures them with the osnoise
// tracer. Night 1 measures the baseline; night 2's tag carries the
// planted regression: the baseline is measured again, the regression
// bisected to the planted commit; night 3 finds it still present; night
// 4's tag reverts it and closes the incident. Heavy: KBISECT_E2E=1 (just
// e2e-nightly), with what just e2e-prepare makes.
func TestQEMUNightlyOnARealSeries(t *testing.T) {
	tree, labDir, cache, out := e2eLab(t, "nightly on real kernels in QEMU: set KBISECT_E2E=1 (just e2e-nightly)")
	base, planted, tip := e2eSeries(t, tree)
	date := "@1767225600 +0000" // the revert's, so that its kernel is the same every run
	git := e2eGit(t, &date)
	series := strings.Fields(git(tree, "rev-list", "--reverse", base+".."+tip))
	at := -1
	for i, c := range series {
		if c == planted {
			at = i
		}
	}
	if len(series) != len(e2eSteps) || at < 13 || at > 22 {
		t.Fatalf("the series has %d commits, the planted one at %d", len(series), at)
	}
	// The releases: two before the regression, one after it, the tip.
	tags := []struct{ name, commit string }{{"v6.12.201", series[3]}, {"v6.12.202", series[11]}, {"v6.12.203", series[23]}, {"v6.12.204", tip}}
	untag := func() {
		for _, tag := range append(tags, struct{ name, commit string }{"v6.12.205", ""}) {
			_ = exec.Command("git", "-C", tree, "tag", "-d", tag.name).Run()
		}
	}
	untag()
	t.Cleanup(untag)
	gitDir := filepath.Join(tree, ".git")
	_ = os.RemoveAll(filepath.Join(gitDir, "kbisect", "nightly-qemu-e2e-nightly")) // a run before this one
	reports := filepath.Join(out, "nightly-reports")
	job := e2eJob(t, filepath.Join(out, "qemu-e2e-nightly.yaml"), "qemu-e2e-nightly", tree, labDir, cache,
		"report:\n  formats: [text, html, junit]\n  dir: "+reports+"\n")
	// A quiet TCG guest's single noises spread over a decade (0.5-8 ms):
	// judged alone against 15 ms, with no bad kernel beside it to say how
	// large the effect is, it needs more than ten samples to be sure.
	data, err := os.ReadFile(job)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, job, strings.Replace(string(data), "samples: {min: 3, max: 10}", "samples: {min: 3, max: 20}", 1))
	db := filepath.Join(out, "nightly-history.db")
	_ = os.Remove(db)

	ctx := context.Background()
	night := func(n int, publish ...string) (int, nightly.Result) {
		t.Helper()
		for _, name := range publish {
			for _, tag := range tags {
				if tag.name == name {
					git(tree, "tag", "-f", tag.name, tag.commit)
				}
			}
		}
		start := time.Now()
		code, stdout, stderr := runCLI(t, ctx, "nightly", "--job", job, "--remote", tree, "--branch", "kbisect-e2e-qemu", "--tags", "v6.12.2*",
			"--db", db, "--json")
		writeFile(t, filepath.Join(out, fmt.Sprintf("night-%d.stderr", n)), stderr)
		var res nightly.Result
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("night %d: exit %d: %v\n%s\n%s", n, code, err, stdout, lastLines(stderr, 60))
		}
		t.Logf("night %d in %s: exit %d, %s: %s", n, time.Since(start).Round(time.Second), code, res.Result, measuredTags(res))
		return code, res
	}

	if code, res := night(1, "v6.12.201", "v6.12.202"); code != exitOK || measuredTags(res) != "v6.12.202 good" {
		t.Fatalf("night 1: exit %d, %+v", code, res)
	}
	code, res := night(2, "v6.12.203")
	if code != exitRegression || res.Result != "regression" || res.Incident == nil || res.Incident.Commit != planted ||
		measuredTags(res) != "v6.12.202 good, v6.12.203 bad" {
		t.Fatalf("night 2: exit %d, %+v; the planted commit is %s", code, res, planted)
	}
	t.Logf("night 2: %s", res.Message)
	if code, res := night(3, "v6.12.204"); code != exitRegression || res.Result != "still-present" || measuredTags(res) != "v6.12.204 bad" {
		t.Fatalf("night 3: exit %d, %+v", code, res)
	}

	// A release that reverts the regression, on the branch.
	scratch := filepath.Join(t.TempDir(), "fix")
	git(tree, "worktree", "add", "--detach", "--force", scratch, tip)
	defer git(tree, "worktree", "remove", "--force", scratch)
	git(scratch, "revert", "--no-edit", planted)
	fix := git(scratch, "rev-parse", "HEAD")
	git(tree, "branch", "-f", "kbisect-e2e-qemu", fix)
	tags = append(tags, struct{ name, commit string }{"v6.12.205", fix})
	if code, res := night(4, "v6.12.205"); code != exitOK || res.Result != "fixed" || res.Incident == nil || res.Incident.ClosedTag != "v6.12.205" {
		t.Fatalf("night 4: exit %d, %+v", code, res)
	}
	junit, err := os.ReadFile(filepath.Join(reports, "night.junit.xml"))
	if err != nil || !strings.Contains(string(junit), `failures="0"`) || !strings.Contains(string(junit), "v6.12.205") {
		t.Errorf("night 4's JUnit: %v\n%s", err, junit)
	}
	code, hist, _ := runCLI(t, ctx, "history", "--job", job, "--db", db)
	writeFile(t, filepath.Join(out, "history.txt"), hist)
	if code != exitOK || !strings.Contains(hist, "fixed in v6.12.205") || !strings.Contains(hist, planted[:12]) {
		t.Errorf("history: exit %d\n%s", code, hist)
	}
	t.Logf("history:\n%s", hist)
}
