package culprit

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// flakyTest is a simulated test: it fails with probability rate on the
// commits bad under culprit, and never on the others.
type flakyTest struct {
	d       *DAG
	culprit int
	rate    float64
	rng     *rand.Rand
	// skip lists the commits the test cannot run on (exit 125).
	skip map[int]bool
}

// bisect runs the search to its end with the test.
func (f *flakyTest) bisect(t *testing.T, opt FlakyOptions) (Step, *Flaky) {
	t.Helper()
	s, err := NewFlaky(f.d, opt)
	if err != nil {
		t.Fatal(err)
	}
	for {
		step := s.Next()
		if step.Kind != Measure {
			return step, s
		}
		switch {
		case f.skip[step.Commit]:
			s.Skip(step.Commit)
		case f.d.IsAncestor(f.culprit, step.Commit):
			s.Observe(step.Commit, f.rng.Float64() < f.rate)
		default:
			s.Observe(step.Commit, false)
		}
	}
}

// TestFlakyFindsTheCulpritOfAFlakyTestOnAChain is the simulation of the
// issue: 1,000 commits, a bad commit fails one run in two (or three); at
// confidence 0.99 at least 97 % of the seeded runs name the culprit.
func TestFlakyFindsTheCulpritOfAFlakyTestOnAChain(t *testing.T) {
	const n, seeds = 1000, 200
	for _, rate := range []float64{0.5, 0.3} {
		right, inconclusive, runs := 0, 0, 0
		var all []int
		for seed := range uint64(seeds) {
			rng := rand.New(rand.NewPCG(seed, 5))
			f := &flakyTest{d: Chain(n), culprit: rng.IntN(n), rate: rate, rng: rng}
			step, s := f.bisect(t, FlakyOptions{Confidence: 0.99})
			switch {
			case step.Kind == Found && step.Commit == f.culprit:
				right++
			case step.Kind == Inconclusive:
				inconclusive++
			}
			runs += s.Runs()
			all = append(all, s.Runs())
		}
		slices.Sort(all)
		t.Logf("rate %.1f: %d of %d right, %d inconclusive, %.1f runs on average (median %d, max %d; git bisect: %d)",
			rate, right, seeds, inconclusive, float64(runs)/seeds, all[seeds/2], all[seeds-1], int(math.Ceil(math.Log2(n))))
		if right < seeds*97/100 {
			t.Errorf("rate %.1f: %d of %d right, want at least 97 %%", rate, right, seeds)
		}
	}
}

// mergeDAG is a side branch of side commits (from the good side) merged
// into a mainline of main commits, and after commits on top: the merge
// is commit main+side.
func mergeDAG(t *testing.T, main, side, after int) *DAG {
	t.Helper()
	var parents [][]int
	for i := range main {
		parents = append(parents, nil)
		if i > 0 {
			parents[i] = []int{i - 1}
		}
	}
	for i := range side {
		parents = append(parents, nil)
		if i > 0 {
			parents[main+i] = []int{main + i - 1}
		}
	}
	parents = append(parents, []int{main - 1, main + side - 1})
	for i := range after {
		parents = append(parents, []int{main + side + i})
	}
	d, err := NewDAG(parents)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestFlakyFindsTheCulpritAcrossAMerge: on the side branch, on the
// mainline, or the merge itself (both its parents good).
func TestFlakyFindsTheCulpritAcrossAMerge(t *testing.T) {
	const main, side, after = 60, 40, 20
	d := mergeDAG(t, main, side, after)
	if d.IsChain() {
		t.Fatal("the merge made a chain")
	}
	for name, culprit := range map[string]int{"side branch": main + 25, "mainline": 30, "merge": main + side} {
		right := 0
		for seed := range uint64(50) {
			f := &flakyTest{d: d, culprit: culprit, rate: 0.5, rng: rand.New(rand.NewPCG(seed, 7))}
			if step, _ := f.bisect(t, FlakyOptions{}); step.Kind == Found && step.Commit == culprit {
				right++
			}
		}
		if right < 49 {
			t.Errorf("%s: %d of 50 right", name, right)
		}
	}
}

// TestFlakyIsInconclusiveWhenTheCulpritCannotBeToldFromASkip: the
// culprit, or its parent, cannot be tested: no run tells the two apart,
// and the search says so as soon as the pair holds the confidence.
func TestFlakyIsInconclusiveWhenTheCulpritCannotBeToldFromASkip(t *testing.T) {
	for _, skipped := range []int{100, 99} {
		for _, rate := range []float64{1, 0.5} {
			f := &flakyTest{d: Chain(200), culprit: 100, rate: rate, rng: rand.New(rand.NewPCG(3, 3)), skip: map[int]bool{skipped: true}}
			step, s := f.bisect(t, FlakyOptions{})
			var commits []int
			for _, c := range step.Candidates {
				commits = append(commits, c.Commit)
			}
			slices.Sort(commits)
			want := []int{99, 100}
			if skipped == 100 {
				want = []int{100, 101}
			}
			if step.Kind != Inconclusive || !slices.Equal(commits, want) || step.Probability < 0.99 {
				t.Errorf("skip %d, rate %g: %v %v at %.3f (%s), want inconclusive %v", skipped, rate, step.Kind, commits, step.Probability, step.Reason, want)
			}
			if s.Runs() >= DefaultMaxRuns(200) {
				t.Errorf("skip %d, rate %g: the budget ran out (%d runs)", skipped, rate, s.Runs())
			}
		}
	}
}

// TestFlakyTakesFewRunsMoreThanGitForATestThatNeverFlakes: a test that
// always fails on bad commits costs the bisection's runs and a few
// more, to clear the last good commit of being bad and unlucky and the
// culprit of being a good commit that flaked.
func TestFlakyTakesFewRunsMoreThanGitForATestThatNeverFlakes(t *testing.T) {
	for _, n := range []int{100, 1000} {
		runs := 0
		for seed := range uint64(50) {
			rng := rand.New(rand.NewPCG(seed, 1))
			f := &flakyTest{d: Chain(n), culprit: rng.IntN(n), rate: 1, rng: rng}
			step, s := f.bisect(t, FlakyOptions{})
			if step.Kind != Found || step.Commit != f.culprit {
				t.Errorf("n %d seed %d: %v %d, want %d", n, seed, step.Kind, step.Commit, f.culprit)
			}
			runs += s.Runs()
		}
		git := math.Ceil(math.Log2(float64(n)))
		mean := float64(runs) / 50
		t.Logf("%d commits: %.1f runs on average (git bisect: %g)", n, mean, git)
		if mean > git+24 {
			t.Errorf("%d commits: %.1f runs on average, git bisect needs %g", n, mean, git)
		}
	}
}

// TestFlakyReplaysItsLogToTheSameSearch: the log rebuilds the posterior
// and the next step exactly, and the same runs make the same choices.
func TestFlakyReplaysItsLogToTheSameSearch(t *testing.T) {
	d := mergeDAG(t, 30, 20, 10)
	f := &flakyTest{d: d, culprit: 40, rate: 0.4, rng: rand.New(rand.NewPCG(9, 9)), skip: map[int]bool{45: true, 12: true}}
	s, err := NewFlaky(d, FlakyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 12 {
		step := s.Next()
		if step.Kind != Measure {
			t.Fatalf("ended early: %+v", step)
		}
		if f.skip[step.Commit] {
			s.Skip(step.Commit)
		} else {
			s.Observe(step.Commit, d.IsAncestor(f.culprit, step.Commit) && f.rng.Float64() < f.rate)
		}
	}
	again, _ := NewFlaky(d, FlakyOptions{})
	for _, r := range s.Log() {
		if err := again.Replay(r); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(s.Probabilities(), again.Probabilities()) || s.Next().Commit != again.Next().Commit || s.Runs() != again.Runs() {
		t.Error("the replayed search differs")
	}
	if err := again.Replay(FlakyRun{Commit: d.Len()}); err == nil {
		t.Error("a run of a commit outside the range was replayed")
	}
}

// Two failures that no single culprit makes both bad (on two branches
// of a merge): one of them was the test flaking on a good commit, and
// the runs that follow tell which.
func TestFlakyTakesAFailureNoCulpritExplainsForAFlake(t *testing.T) {
	d := mergeDAG(t, 5, 5, 0) // two roots: 0 and 5
	rng := rand.New(rand.NewPCG(4, 4))
	f := &flakyTest{d: d, culprit: 2, rate: 0.5, rng: rng}
	s, err := NewFlaky(d, FlakyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Observe(2, true)
	s.Observe(7, true) // 7 is good under culprit 2: a flake
	for {
		step := s.Next()
		if step.Kind != Measure {
			if step.Kind != Found || step.Commit != 2 {
				t.Fatalf("%+v after %d runs", step, s.Runs())
			}
			break
		}
		s.Observe(step.Commit, d.IsAncestor(2, step.Commit) && f.rng.Float64() < f.rate)
	}
	if bad, good := s.Rates(); !(good > 0.005 && good < bad) {
		t.Errorf("rates %.3f on bad commits, %.4f on good ones: the flake at 7 should show in the second", bad, good)
	}
}

func TestFlakyOptionsThatCannotWorkAreErrors(t *testing.T) {
	for name, o := range map[string]FlakyOptions{
		"confidence 0.5": {Confidence: 0.5},
		"confidence 1":   {Confidence: 1},
		"prior length":   {Prior: []float64{1, 2}},
		"prior of none":  {Prior: make([]float64, 10)},
	} {
		if _, err := NewFlaky(Chain(10), o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
