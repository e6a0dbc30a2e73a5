package run

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/internal/commitid"
	"kbisect/internal/simlab"
	"kbisect/internal/simnoise"
)

// The sweep measures the posterior search (verdict.search: posterior, at
// its default confidence, whatever the lab's job file says) end to end on the simulated
// lab (run.Job: builds, boots and osnoise over SSH), not on the
// Monte-Carlo: one seeded lab per run, each with its own history and
// regression. It is for acceptance, not for every go test:
//
//	KBISECT_LAB_SWEEP=50 go test ./run -run TestSimulatedLabSweep -v -timeout 120m
//
// KBISECT_LAB_SWEEP is how many runs (seeds 1..N, or from
// KBISECT_LAB_SWEEP_FIRST); KBISECT_LAB_SWEEP_ROW the lab (sweepRows);
// KBISECT_LAB_SWEEP_DIR keeps the labs of wrong and aborted runs there
// (else they go with the test), KBISECT_LAB_SWEEP_KEEP=1 every run's. A wrong found fails the test; an
// inconclusive or not reproduced run is reported, not failed.

// sweepRows are the labs a sweep can run.
var sweepRows = map[string]struct {
	opt   simlab.Options
	noise string
}{
	// 7 µs against 15 µs on the longest single noise, no storm; boots
	// that land on the other side.
	"badboots": {simlab.Options{GoodNoise: 7 * time.Microsecond, BadNoise: 15 * time.Microsecond, NoStorm: true},
		"spread=0.2,bad-boots=5%,spikes=5%:2-20x"},
	// The seed report's levels, 3 µs and 17 µs: the bad kernels storm.
	"storm": {simlab.Options{}, "spread=0.2,bad-boots=5%,spikes=5%:2-20x"},
	// 7 µs against 15 µs, each boot's level scattered instead.
	"bootspread": {simlab.Options{GoodNoise: 7 * time.Microsecond, BadNoise: 15 * time.Microsecond, NoStorm: true},
		"spread=0.2,boot-spread=0.25,spikes=5%:2-20x"},
}

// Outcomes of a sweep's run.
const (
	sweepRight        = "right"
	sweepWrong        = "wrong-found"
	sweepInconclusive = "inconclusive"
	sweepNotRepro     = "not-reproduced"
	sweepAborted      = "aborted"
)

// sweepRun is one run of a sweep.
type sweepRun struct {
	seed        int64
	outcome     string
	unbuildable bool // the regression is among commits that do not build
	boots       int  // the search's and the calibration's
	seconds     float64
	line        string
}

func TestSimulatedLabSweep(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("KBISECT_LAB_SWEEP"))
	if n <= 0 {
		t.Skip("the simulated lab sweep runs with KBISECT_LAB_SWEEP=N (N seeded runs, ~30 s each)")
	}
	if err := simlab.Requirements(); err != nil {
		t.Skip(err)
	}
	name := os.Getenv("KBISECT_LAB_SWEEP_ROW")
	if name == "" {
		name = "badboots"
	}
	row, ok := sweepRows[name]
	if !ok {
		t.Fatalf("KBISECT_LAB_SWEEP_ROW=%s: the rows are badboots, storm and bootspread", name)
	}
	model, err := simnoise.Parse(row.noise)
	if err != nil {
		t.Fatal(err)
	}
	first := int64(1)
	if s := os.Getenv("KBISECT_LAB_SWEEP_FIRST"); s != "" {
		if first, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("KBISECT_LAB_SWEEP_FIRST=%s: %v", s, err)
		}
	}
	base := os.Getenv("KBISECT_LAB_SWEEP_DIR")
	if base == "" {
		base = t.TempDir()
	}
	t.Logf("row %s: %d runs from seed %d, 200 commits, noise %s", name, n, first, model)
	var runs []sweepRun
	for seed := first; seed < first+int64(n); seed++ {
		opt := row.opt
		opt.Seed, opt.Commits, opt.Noise = seed, 200, model
		r := sweepOne(t, filepath.Join(base, fmt.Sprintf("%s-seed-%d", name, seed)), opt)
		t.Log(r.line)
		runs = append(runs, r)
	}
	tally := sweepTally(name, runs)
	for _, l := range strings.Split(tally, "\n") {
		t.Log(l)
	}
	if w := countRuns(runs, sweepWrong); w > 0 {
		t.Errorf("%d of %d runs found the wrong commit", w, len(runs))
	}
}

// sweepOne makes the lab of opt in dir, runs the job on it, and says how
// it went. A right or merely undecided run's lab is removed.
func sweepOne(t *testing.T, dir string, opt simlab.Options) sweepRun {
	r := sweepRun{seed: opt.Seed, outcome: sweepAborted}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	l, err := simlab.New(dir, opt)
	if err != nil {
		t.Fatalf("seed %d: %v", opt.Seed, err)
	}
	defer l.Close()
	if err := posteriorJob(l.JobFile); err != nil {
		t.Fatal(err)
	}
	tree := l.Tree
	r.unbuildable = tree.Expected.FirstBad == ""
	var msgs bytes.Buffer
	o := JobOptions{Range: Range{Goods: []string{tree.Good}, Bad: tree.Bad}, Jobs: []string{l.JobFile},
		State: filepath.Join(dir, "state"), Messages: &msgs}
	start := time.Now()
	res, err := Job(context.Background(), o)
	r.seconds = time.Since(start).Seconds()
	defer res.Close()
	found := ""
	if res != nil {
		found = res.JSON.FirstBad
		if res.Report != nil && res.Report.Search != nil {
			r.boots = res.Report.Search.Boots + res.Report.Search.CalibrationBoots
		}
	}
	var detail string
	switch {
	case err != nil || res == nil:
		detail = fmt.Sprintf("%v", err)
	case res.Kind == bisect.Found && (found == tree.Expected.FirstBad || (r.unbuildable && found == tree.Regression)):
		r.outcome = sweepRight
	case res.Kind == bisect.Found:
		r.outcome = sweepWrong
	case res.Kind == bisect.Inconclusive:
		r.outcome = sweepInconclusive
		if r.unbuildable {
			r.outcome = sweepRight // no test can tell the regression from the commits that do not build
		}
		detail = "candidates " + shortList(res.JSON.Candidates)
	case res.Kind == bisect.NotReproduced:
		r.outcome = sweepNotRepro
	default:
		detail = res.JSON.Error
	}
	if res != nil && res.Report != nil && res.Report.Search != nil {
		detail = strings.TrimSpace(detail + " " + res.Report.Search.Reason)
	}
	r.line = fmt.Sprintf("seed %3d: %-14s found %-12s planted %s%s, boots %3d, %5.1fs %s", opt.Seed, r.outcome,
		short(found), short(tree.Regression), map[bool]string{true: " (among unbuildable commits)"}[r.unbuildable],
		r.boots, r.seconds, detail)
	if r.outcome == sweepWrong || r.outcome == sweepAborted || os.Getenv("KBISECT_LAB_SWEEP_KEEP") != "" {
		r.line += fmt.Sprintf("\n    lab and journal kept in %s (state/search.jsonl); kbisect said:\n%s", dir, indent(msgs.String()))
		return r
	}
	l.Close()
	_ = os.RemoveAll(dir)
	return r
}

// posteriorJob makes the lab's job search by the posterior at its own
// confidence (configs.DefaultSearchConfidence), whatever the lab's job
// file and the defaults of the day say.
func posteriorJob(path string) error {
	job, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var out []string
	for _, line := range strings.Split(string(job), "\n") {
		switch t := strings.TrimSpace(line); {
		case strings.HasPrefix(t, "confidence:") || strings.HasPrefix(t, "search:"):
			continue
		case line == "verdict:":
			line += "\n  search: " + configs.SearchPosterior
		}
		out = append(out, line)
	}
	return os.WriteFile(path, []byte(strings.Join(out, "\n")), 0o644)
}

// sweepTally is the sweep's totals.
func sweepTally(row string, runs []sweepRun) string {
	var boots, secs float64
	unbuildable := 0
	for _, r := range runs {
		boots += float64(r.boots)
		secs += r.seconds
		if r.unbuildable {
			unbuildable++
		}
	}
	k := float64(max(len(runs), 1))
	var b strings.Builder
	fmt.Fprintf(&b, "row %s: %d runs: %d right, %d wrong found, %d inconclusive, %d not reproduced, %d aborted; mean boots %.1f, mean wall %.1fs",
		row, len(runs), countRuns(runs, sweepRight), countRuns(runs, sweepWrong), countRuns(runs, sweepInconclusive),
		countRuns(runs, sweepNotRepro), countRuns(runs, sweepAborted), boots/k, secs/k)
	if unbuildable > 0 {
		var seeds []string
		for _, r := range runs {
			if r.unbuildable {
				seeds = append(seeds, fmt.Sprintf("%d (%s)", r.seed, r.outcome))
			}
		}
		fmt.Fprintf(&b, "\n  %d planted among commits that do not build (inconclusive is right there): seeds %s", unbuildable, strings.Join(seeds, ", "))
	}
	return b.String()
}

func countRuns(runs []sweepRun, outcome string) int {
	n := 0
	for _, r := range runs {
		if r.outcome == outcome {
			n++
		}
	}
	return n
}

func short(c string) string {
	if c == "" {
		return "-"
	}
	return commitid.Short(c)
}

func shortList(cs []string) string {
	s := make([]string, 0, len(cs))
	for _, c := range cs {
		s = append(s, short(c))
	}
	return "[" + strings.Join(slices.Clip(s), " ") + "]"
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "    (nothing)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
