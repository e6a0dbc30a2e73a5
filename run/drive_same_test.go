package run

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/culprit"
	"kbisect/internal/simlab"
	"kbisect/internal/simnoise"
	"kbisect/lab"
	"kbisect/progress"
	"kbisect/simulate"
	"kbisect/worktree"
)

// TestSimulateAndRunDriveTheSameSearch: run --job on the simulated lab
// (a generated tree with merges and commits that do not build, kernels
// built with make and gcc, booted and measured over SSH) and a simulation
// of the same range, culprit and noise (simulate.Trace: the host's seed,
// the costs the run's journal measured, its build slot) ask for the same
// kernels in the same order, measure the same samples, and end alike:
// what simulate says is what run does.
func TestSimulateAndRunDriveTheSameSearch(t *testing.T) {
	if err := simlab.Requirements(); err != nil {
		t.Skip(err)
	}
	model, err := simnoise.Parse("spread=0.2,boot-spread=0.05,spikes=5%:2-20x")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		seed uint64
		// brokenParent makes the culprit's parent a commit that does
		// not build: the search skips it, and cannot tell the two apart.
		brokenParent bool
	}{{"found and confirmed by a revert", 11, false}, {"skips around a culprit whose parent does not build", 3, true}} {
		t.Run(c.name, func(t *testing.T) { sameSearch(t, model, c.seed, c.brokenParent) })
	}
}

func sameSearch(t *testing.T, model simnoise.Model, seed uint64, brokenParent bool) {
	ctx := context.Background()
	dir := t.TempDir()
	good, bad := 20*time.Microsecond, 45*time.Microsecond
	l, err := simlab.New(dir, simlab.Options{Seed: int64(seed), Commits: 90, Noise: model, GoodNoise: good, BadNoise: bad, NoStorm: true, Duration: time.Second, BrokenBeforeRegression: brokenParent})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	nm := l.Host.NoiseModel()
	nm.Exact = true
	if err := l.Host.SetNoiseModel(nm); err != nil {
		t.Fatal(err)
	}
	l.Host.SetSeed(seed)
	state := filepath.Join(dir, "state")
	var msgs strings.Builder
	res, err := Job(ctx, JobOptions{Range: Range{Goods: []string{l.Tree.Good}, Bad: l.Tree.Bad},
		Jobs: []string{l.JobFile}, State: state, Messages: &msgs, Progress: progress.NewLines(&msgs)})
	if err != nil {
		t.Fatalf("%v\n%s", err, msgs.String())
	}
	defer res.Close()
	j, err := lab.OpenSearchJournal(state)
	if err != nil {
		t.Fatal(err)
	}
	records := j.Records()
	j.Close()

	// The range as run sees it, and the tree's truth.
	rev := func(r string) plumbing.Hash {
		out, err := exec.Command("git", "-C", l.Tree.Dir, "rev-parse", r+"^{commit}").Output()
		if err != nil {
			t.Fatalf("git rev-parse %s: %v", r, err)
		}
		return plumbing.NewHash(strings.TrimSpace(string(out)))
	}
	g, err := bisect.OpenGraph(ctx, l.Tree.Dir)
	if err != nil {
		t.Fatal(err)
	}
	goodHash, badHash := rev(l.Tree.Good), rev(l.Tree.Bad)
	commits, parents, err := g.RangeCommits(badHash, []plumbing.Hash{goodHash}, false)
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]int{}
	for i, h := range commits {
		index[h.String()] = i
	}
	merges := 0
	for _, ps := range parents {
		if len(ps) > 1 {
			merges++
		}
	}
	r := simulate.Range{Parents: parents, Culprit: -1, Broken: map[int]bool{}}
	if i, ok := index[l.Tree.Regression]; ok {
		r.Culprit = i
	}
	for _, h := range l.Tree.Broken {
		if i, ok := index[h]; ok {
			r.Broken[i] = true
		}
	}
	if r.Culprit < 0 || merges == 0 || len(r.Broken) == 0 {
		t.Fatalf("the tree: culprit %d, %d merges, %d broken of %d commits; want a culprit in the range, merges and broken builds", r.Culprit, merges, len(r.Broken), len(commits))
	}
	r.RevertApplies = func(i int) bool {
		c := worktree.Change{Revert: commits[i].String()}
		if len(parents[i]) > 1 {
			c.Mainline = 1
		}
		_, err := worktree.Derive(ctx, l.Tree.Dir, badHash.String(), c)
		return err == nil
	}
	// The costs the run told its search after each boot: what its
	// journal had measured by then (the simulated lab's clock is real).
	guess := culprit.Costs{Build: 600, Boot: 90, Sample: 6}
	costs := func(boots int) culprit.Costs { return measuredCosts(records[:min(boots, len(records))], guess) }

	cfg := simulate.Config{Good: float64(good.Nanoseconds()), Bad: float64(bad.Nanoseconds()), Noise: model,
		Threshold: float64(l.Threshold.Nanoseconds()), MinSamples: 3, MaxSamples: 5, Confidence: 0.99}
	traced, err := simulate.Trace(ctx, cfg, r, simulate.TraceOptions{Host: seed, Slots: 1, Costs: costs})
	if err != nil {
		t.Fatal(err)
	}

	// The run's boots, as indexes of the range.
	type boot struct {
		commit   int
		reverted bool
		skipped  bool
		samples  []float64
	}
	var ran, simulated []boot
	for _, rec := range records {
		b := boot{reverted: rec.Reverted, skipped: rec.Kind == lab.SearchSkip, samples: rec.Values}
		switch {
		case rec.Kind == lab.SearchGood, rec.Commit == goodHash.String() && !rec.Reverted:
			b.commit = culprit.GoodEndpoint
		case rec.Kind == lab.SearchBad:
			b.commit = len(commits) - 1
		default:
			i, ok := index[rec.Commit]
			if !ok {
				t.Fatalf("the journal names %s, not in the range", rec.Commit)
			}
			b.commit = i
		}
		ran = append(ran, b)
	}
	for _, tb := range traced.Boots {
		simulated = append(simulated, boot{commit: tb.Commit, reverted: tb.Reverted, skipped: tb.Skipped, samples: tb.Samples})
	}
	describe := func(bs []boot) string {
		var s []string
		for _, b := range bs {
			w := ""
			switch {
			case b.skipped:
				w = " skipped"
			case b.reverted:
				w = " reverted"
			}
			s = append(s, fmt.Sprintf("%d%s×%d", b.commit, w, len(b.samples)))
		}
		return strings.Join(s, " ")
	}
	if len(ran) != len(simulated) {
		t.Fatalf("run took %d boots, the simulation %d:\nrun:      %s\nsimulate: %s\n%s", len(ran), len(simulated), describe(ran), describe(simulated), msgs.String())
	}
	for i := range ran {
		a, b := ran[i], simulated[i]
		same := a.commit == b.commit && a.reverted == b.reverted && a.skipped == b.skipped && len(a.samples) == len(b.samples)
		for k := 0; same && k < len(a.samples); k++ {
			same = math.Abs(a.samples[k]-b.samples[k]) < 0.5
		}
		if !same {
			t.Fatalf("boot %d: run %+v, the simulation %+v\nrun:      %s\nsimulate: %s", i, a, b, describe(ran), describe(simulated))
		}
	}
	runFound, simFound := res.Kind == bisect.Found, traced.End != nil && traced.End.Kind == culprit.Found
	switch {
	case runFound != simFound, runFound && res.JSON.FirstBad != commits[traced.End.Commit].String():
		t.Fatalf("run: %s %s; the simulation: %+v", res.Kind, res.JSON.FirstBad, traced.End)
	case l.Tree.Expected.FirstBad != "" && (!runFound || res.JSON.FirstBad != l.Tree.Expected.FirstBad):
		t.Fatalf("run: %s %s; want %s found", res.Kind, res.JSON.FirstBad, l.Tree.Expected.FirstBad)
	}
	skipped, reverted := 0, 0
	for _, b := range ran {
		if b.skipped {
			skipped++
		} else if b.reverted {
			reverted++
		}
	}
	if brokenParent && skipped == 0 || !brokenParent && reverted == 0 {
		t.Errorf("%d boots skipped, %d of a revert: want the case's", skipped, reverted)
	}
	t.Logf("%d boots alike (%d skipped, %d reverted), %d commits, %d merges, %d broken: %s", len(ran), skipped, reverted, len(commits), merges, len(r.Broken), describe(ran))
}
