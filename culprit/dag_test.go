package culprit

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randomParents is a range of n commits with random forks and merges
// (octopus ones included), every commit an ancestor of the last.
func randomParents(rng *rand.Rand, n int) [][]int {
	parents := make([][]int, n)
	children := make([]int, n)
	for i := 1; i < n; i++ {
		if rng.IntN(8) == 0 {
			continue // a root: its parents lie before the range
		}
		p := rng.IntN(i)
		if rng.IntN(2) == 0 {
			p = i - 1
		}
		parents[i] = []int{p}
		children[p]++
		for rng.IntN(4) == 0 {
			if q := rng.IntN(i); q != p && !contains(parents[i], q) {
				parents[i] = append(parents[i], q)
				children[q]++
			}
		}
	}
	for i := n - 2; i >= 0; i-- {
		if children[i] == 0 {
			k := i + 1 + rng.IntN(n-1-i)
			parents[k] = append(parents[k], i)
			children[i]++
		}
	}
	return parents
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// ancestorsByBFS walks the parents from b: the ancestors-or-self.
func ancestorsByBFS(parents [][]int, b int) map[int]bool {
	seen := map[int]bool{b: true}
	queue := []int{b}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		for _, p := range parents[x] {
			if !seen[p] {
				seen[p] = true
				queue = append(queue, p)
			}
		}
	}
	return seen
}

func TestIsAncestorMatchesBFSOnRandomDAGs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	for _, n := range []int{1, 2, 40, 63, 64, 65, 130} {
		for trial := 0; trial < 4; trial++ {
			parents := randomParents(rng, n)
			d := mustDAG(t, parents)
			for b := 0; b < n; b++ {
				anc := ancestorsByBFS(parents, b)
				for a := 0; a < n; a++ {
					if got := d.IsAncestor(a, b); got != anc[a] {
						t.Fatalf("n=%d trial %d: IsAncestor(%d, %d) = %v, BFS says %v", n, trial, a, b, got, anc[a])
					}
				}
			}
			if last := ancestorsByBFS(parents, n-1); len(last) != n {
				t.Fatalf("n=%d: the bad endpoint has %d ancestors-or-self, want all %d", n, len(last), n)
			}
		}
	}
}

func TestBadnessMatchesBruteForceSumOnRandomDAGs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 2))
	for _, n := range []int{40, 41, 64, 100, 130} {
		parents := randomParents(rng, n)
		d := mustDAG(t, parents)
		if d.IsChain() {
			t.Fatalf("n=%d: the random range came out linear; the test wants merges", n)
		}
		for trial := 0; trial < 5; trial++ {
			p := make([]float64, n)
			total := 0.0
			for i := range p {
				p[i] = rng.ExpFloat64()
				if rng.IntN(3) == 0 {
					p[i] = 0 // sparse vectors leave whole bytes of the bitsets empty
				}
				total += p[i]
			}
			// Leave a share for "none", as the posterior does.
			for i := range p {
				p[i] *= 0.9 / total
			}
			q := d.badness(p)
			for x := 0; x < n; x++ {
				want := 0.0
				for c := range ancestorsByBFS(parents, x) {
					want += p[c]
				}
				if math.Abs(q[x]-want) > 1e-12 {
					t.Fatalf("n=%d trial %d: badness of %d is %.15g, brute force %.15g", n, trial, x, q[x], want)
				}
			}
		}
	}
}

func TestBadnessOnAChainIsTheRunningSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 3))
	const n = 70
	linear := make([][]int, n)
	for i := 1; i < n; i++ {
		linear[i] = []int{i - 1}
	}
	viaNewDAG := mustDAG(t, linear)
	if !viaNewDAG.IsChain() {
		t.Fatal("NewDAG of a linear range is not a chain")
	}
	p := make([]float64, n)
	for i := range p {
		p[i] = rng.Float64() / n
	}
	q := Chain(n).badness(p)
	sum := 0.0
	for i := range p {
		sum += p[i]
		if math.Abs(q[i]-sum) > 1e-12 {
			t.Fatalf("badness of %d is %g, want %g", i, q[i], sum)
		}
		if !viaNewDAG.IsAncestor(i, n-1) || (i > 0 && viaNewDAG.IsAncestor(i, i-1)) {
			t.Fatalf("IsAncestor on the chain is wrong at %d", i)
		}
	}
}

func TestNewDAGRejectsBrokenRanges(t *testing.T) {
	for name, parents := range map[string][][]int{
		"empty":            {},
		"parent after":     {{}, {2}, {1}},
		"self parent":      {{}, {1}},
		"negative parent":  {{}, {-1}},
		"dangling commit":  {{}, {0}, {0}},
		"not before range": {nil, {0}, {1}, {5}},
	} {
		if _, err := NewDAG(parents); err == nil {
			t.Errorf("%s: NewDAG(%v) took a broken range", name, parents)
		}
	}
}
