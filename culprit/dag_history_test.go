package culprit

import (
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"

	"kbisect/internal/testrepo"
)

// kernelRange is the range of a generated kernel-like history (subsystem
// trees, topics, back-merges, octopus and criss-cross merges) from the
// newest main-line commit down to the first-parent ancestor whose range
// holds about want commits, in the order the commits were made: an
// order after the parents, but not the depth-first one of git's ranges.
func kernelRange(t testing.TB, seed int64, want int) [][]int {
	t.Helper()
	h := testrepo.Generate(seed, testrepo.Shape{Commits: want * 4 / 3, Subsystems: 12, Octopus: true, CrissCross: true})
	n := len(h.Commits)
	below := func(from int) []bool {
		mark := make([]bool, n)
		mark[from] = true
		stack := []int{from}
		for len(stack) > 0 {
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, p := range h.Commits[c].Parents {
				if !mark[p] {
					mark[p], stack = true, append(stack, p)
				}
			}
		}
		return mark
	}
	all := below(h.Mainline)
	var line []int
	for c := h.Mainline; ; c = h.Commits[c].Parents[0] {
		line = append(line, c)
		if len(h.Commits[c].Parents) == 0 {
			break
		}
	}
	// The deepest first-parent ancestor whose range is at most want.
	k := sortSearch(len(line), func(k int) bool { return count(all, below(line[k])) > want }) - 1
	good := below(line[max(k, 1)])
	index := make([]int, n)
	var parents [][]int
	for c := range n {
		if !all[c] || good[c] {
			continue
		}
		index[c] = len(parents)
		var ps []int
		for _, p := range h.Commits[c].Parents {
			if !good[p] {
				ps = append(ps, index[p])
			}
		}
		parents = append(parents, ps)
	}
	return parents
}

func sortSearch(n int, f func(int) bool) int {
	lo, hi := 0, n
	for lo < hi {
		m := (lo + hi) / 2
		if f(m) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

func count(in, out []bool) int {
	k := 0
	for c := range in {
		if in[c] && !out[c] {
			k++
		}
	}
	return k
}

// TestRunsAndBitsetsChooseTheSameCommits: on a kernel-like range, the
// posterior search and the flaky-test search ask for the same commits in
// the same order and end the same, whether the ancestors are kept as runs
// of places or as the bitsets they replace.
func TestRunsAndBitsetsChooseTheSameCommits(t *testing.T) {
	parents := kernelRange(t, 5, 1500)
	kinds := bothKinds(t, parents)
	if len(kinds) != 2 || kinds[0].place == nil {
		t.Fatalf("the range of %d commits should have merges and come out of depth-first order", len(parents))
	}
	n := len(parents)
	for seed := uint64(1); seed <= 4; seed++ {
		culprit := int(seed*389) % n
		var steps [2][]Step
		var ends [2]Step
		for i, d := range kinds {
			l := newLab(t, seed, d, culprit)
			ends[i] = l.run(l.calibrated(Options{}))
			steps[i] = l.steps
		}
		if !reflect.DeepEqual(steps[0], steps[1]) || !reflect.DeepEqual(ends[0], ends[1]) {
			t.Fatalf("seed %d: the posterior search took %d boots ending %+v with runs, %d ending %+v with bitsets",
				seed, len(steps[0]), ends[0], len(steps[1]), ends[1])
		}
		if ends[0].Kind != Found || ends[0].Commit != culprit {
			t.Errorf("seed %d: the posterior search ended %v at %d, the culprit is %d", seed, ends[0].Kind, ends[0].Commit, culprit)
		}
		// The flaky-test search, one test's outcomes given to both: where
		// they ask for different commits, the two are a tie to the last
		// bits of what a run of them tells (the sums round differently).
		rng := rand.New(rand.NewPCG(seed, 3))
		var twins [2]*Flaky
		for i, d := range kinds {
			s, err := NewFlaky(d, FlakyOptions{Confidence: 0.99})
			if err != nil {
				t.Fatal(err)
			}
			twins[i] = s
		}
		ties := 0
		for {
			a, b := twins[0].Next(), twins[1].Next()
			if a.Kind != b.Kind {
				t.Fatalf("seed %d: after %d runs the flaky search says %+v with runs, %+v with bitsets", seed, twins[0].Runs(), a, b)
			}
			if a.Kind != Measure {
				if !reflect.DeepEqual(a, b) || a.Kind != Found || a.Commit != culprit {
					t.Fatalf("seed %d: the flaky search ended %+v with runs, %+v with bitsets; the culprit is %d", seed, a, b, culprit)
				}
				break
			}
			if a.Commit != b.Commit {
				pc, rate, base := twins[1].posterior()
				g := twins[1].gains(pc, rate, base)
				if math.Abs(g[a.Commit]-g[b.Commit]) > 1e-12 {
					t.Fatalf("seed %d: after %d runs the flaky search runs %d with runs, %d with bitsets, which tell %.15g and %.15g",
						seed, twins[0].Runs(), a.Commit, b.Commit, g[a.Commit], g[b.Commit])
				}
				ties++
			}
			failed := kinds[0].IsAncestor(culprit, a.Commit) && rng.Float64() < 0.4
			for _, s := range twins {
				s.Observe(a.Commit, failed)
			}
		}
		t.Logf("seed %d: the flaky search found %d in %d runs, %d of its choices ties", seed, culprit, twins[0].Runs(), ties)
	}
}

// TestAncestryMemoryGrowsWithTheRange: the ancestry of a 200,000-commit
// kernel-like range, and a flaky-test search over it after a few runs,
// hold a few hundred bytes a commit, as they do on a range of 50,000
// (bitsets would hold 25,000 bytes a commit at 200,000).
func TestAncestryMemoryGrowsWithTheRange(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 200,000-commit range")
	}
	perCommit := map[int]float64{}
	for _, size := range []int{50_000, 200_000} {
		parents := kernelRange(t, 9, size)
		n := len(parents)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		d := mustDAG(t, parents)
		s, err := NewFlaky(d, FlakyOptions{Confidence: 0.99})
		if err != nil {
			t.Fatal(err)
		}
		for range 6 {
			step := s.Next()
			s.Observe(step.Commit, d.IsAncestor(n/3, step.Commit))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(s)
		if d.anc != nil {
			t.Fatalf("%d commits: the ancestry fell back to bitsets", n)
		}
		perCommit[size] = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
		t.Logf("%d commits: %.0f bytes a commit held by the ancestry and the search (%.1f runs a commit)", n, perCommit[size], float64(len(d.runs))/2/float64(n))
	}
	if perCommit[200_000] > 400 || perCommit[200_000] > 1.5*perCommit[50_000] {
		t.Fatalf("a commit costs %.0f bytes at 200,000 commits and %.0f at 50,000: want at most 400, and not growing with the range", perCommit[200_000], perCommit[50_000])
	}
}
