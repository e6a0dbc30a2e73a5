package culprit

import (
	"maps"
	"math"
	"math/rand/v2"
	"testing"
)

// bothKinds is a range with merges twice: its ancestors kept as runs of
// places (whatever their size), and as bitsets. A chain is itself.
func bothKinds(t testing.TB, parents [][]int) []*DAG {
	t.Helper()
	runs, bits := mustDAG(t, parents), mustDAG(t, parents)
	if runs.chain {
		return []*DAG{runs}
	}
	if runs.anc != nil {
		runs.anc, runs.words = nil, 0
		if !runs.spans(math.MaxInt) {
			t.Fatal("spans gave up without a limit")
		}
	}
	bits.place, bits.at, bits.from, bits.runs = nil, nil, nil, nil
	bits.bitsets()
	return []*DAG{runs, bits}
}

func (d *DAG) kind() string {
	switch {
	case d.chain:
		return "chain"
	case d.anc != nil:
		return "bitsets"
	}
	return "runs"
}

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
			for _, d := range bothKinds(t, parents) {
				for b := 0; b < n; b++ {
					anc := ancestorsByBFS(parents, b)
					for a := 0; a < n; a++ {
						if got := d.IsAncestor(a, b); got != anc[a] {
							t.Fatalf("n=%d trial %d, %s: IsAncestor(%d, %d) = %v, BFS says %v", n, trial, d.kind(), a, b, got, anc[a])
						}
					}
					seen := map[int]bool{}
					d.eachAncestor(b, func(c int) { seen[c] = true })
					if !maps.Equal(seen, anc) {
						t.Fatalf("n=%d trial %d, %s: eachAncestor(%d) gives %d commits, BFS %d", n, trial, d.kind(), b, len(seen), len(anc))
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
		if mustDAG(t, parents).IsChain() {
			t.Fatalf("n=%d: the random range came out linear; the test wants merges", n)
		}
		for trial := 0; trial < 10; trial++ {
			d := bothKinds(t, parents)[trial%2]
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
					t.Fatalf("n=%d trial %d, %s: badness of %d is %.15g, brute force %.15g", n, trial, d.kind(), x, q[x], want)
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

// TestSignaturesMatchIsAncestor: the commits a culprit would make bad,
// among a few measured ones, as the sweep over runs and the bitsets say
// them, are what IsAncestor says one pair at a time.
func TestSignaturesMatchIsAncestor(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 4))
	for _, n := range []int{2, 40, 130, 300} {
		parents := randomParents(rng, n)
		for _, d := range bothKinds(t, parents) {
			for trial := 0; trial < 6; trial++ {
				var xs []int
				for x := 0; x < n; x++ {
					if rng.IntN(n) < 9 || x == n-1 {
						xs = append(xs, x)
					}
				}
				of, sigs := d.signatures(xs)
				seen := map[string]bool{}
				for c := 0; c < n; c++ {
					sig := sigs[of[c]]
					for i, x := range xs {
						if got := sig[i/8]&(1<<(i%8)) != 0; got != d.IsAncestor(c, x) {
							t.Fatalf("n=%d %s trial %d: commit %d's signature says %v for %d", n, d.kind(), trial, c, got, x)
						}
					}
					seen[sig] = true
				}
				if len(seen) != len(sigs) {
					t.Fatalf("n=%d %s: %d signatures numbered, %d used", n, d.kind(), len(sigs), len(seen))
				}
			}
		}
	}
}
