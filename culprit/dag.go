package culprit

import (
	"fmt"
	"math"
	"math/bits"
)

// DAG is the range's commits, the candidates for the first bad commit, in
// topological order: every commit after its parents. Parents outside the
// range (the good side) are left out. The bad endpoint is the last
// commit, and every commit is its ancestor.
type DAG struct {
	parents [][]int32
	chain   bool
	words   int
	// anc holds each commit's ancestors-or-self as a bitset, built on
	// first need when the range is not a chain.
	anc [][]uint64
}

// Chain is a linear range of n commits: each the parent of the next.
func Chain(n int) *DAG {
	d := &DAG{parents: make([][]int32, n), chain: true, words: (n + 63) / 64}
	for i := 1; i < n; i++ {
		d.parents[i] = []int32{int32(i - 1)}
	}
	return d
}

// NewDAG makes the range from each commit's parents within it, as
// indexes; commits must come after their parents.
func NewDAG(parents [][]int) (*DAG, error) {
	n := len(parents)
	if n == 0 {
		return nil, fmt.Errorf("culprit: an empty range has no culprit")
	}
	d := &DAG{parents: make([][]int32, n), chain: true, words: (n + 63) / 64}
	children := make([]int, n)
	for i, ps := range parents {
		for _, p := range ps {
			if p < 0 || p >= i {
				return nil, fmt.Errorf("culprit: commit %d has parent %d, which does not come before it", i, p)
			}
			d.parents[i] = append(d.parents[i], int32(p))
			children[p]++
		}
		if len(ps) > 1 || (len(ps) == 1 && ps[0] != i-1) || (len(ps) == 0 && i > 0) {
			d.chain = false
		}
	}
	for i := 0; i < n-1; i++ {
		if children[i] == 0 {
			return nil, fmt.Errorf("culprit: commit %d is not an ancestor of the bad endpoint (the last commit)", i)
		}
		if children[i] > 1 {
			d.chain = false
		}
	}
	return d, nil
}

// Len is the number of commits in the range.
func (d *DAG) Len() int { return len(d.parents) }

// Parents are a commit's parents within the range.
func (d *DAG) Parents(i int) []int {
	out := make([]int, len(d.parents[i]))
	for k, p := range d.parents[i] {
		out[k] = int(p)
	}
	return out
}

// IsChain says whether the range is linear.
func (d *DAG) IsChain() bool { return d.chain }

// IsAncestor says whether a is b or one of its ancestors.
func (d *DAG) IsAncestor(a, b int) bool {
	if d.chain {
		return a <= b
	}
	d.build()
	return d.anc[b][a/64]&(1<<(a%64)) != 0
}

func (d *DAG) build() {
	if d.anc != nil {
		return
	}
	d.anc = make([][]uint64, len(d.parents))
	for i, ps := range d.parents {
		set := make([]uint64, d.words)
		for _, p := range ps {
			for w, v := range d.anc[p] {
				set[w] |= v
			}
		}
		set[i/64] |= 1 << (i % 64)
		d.anc[i] = set
	}
}

// eachAncestor calls f with every ancestor-or-self of i.
func (d *DAG) eachAncestor(i int, f func(int)) {
	if d.chain {
		for c := 0; c <= i; c++ {
			f(c)
		}
		return
	}
	d.build()
	for w, v := range d.anc[i] {
		for v != 0 {
			b := bits.TrailingZeros64(v)
			f(w*64 + b)
			v &= v - 1
		}
	}
}

// badness is, for every commit x, the probability that x is bad: the
// mass of the culprits among its ancestors-or-self. On a chain it is a
// running sum; on a DAG each ancestor bitset is summed a byte at a time
// from tables of the 256 sums of each 8 commits' masses.
func (d *DAG) badness(p []float64) []float64 {
	n := len(p)
	q := make([]float64, n)
	if d.chain {
		s := 0.0
		for i, v := range p {
			s += v
			q[i] = math.Min(s, 1)
		}
		return q
	}
	d.build()
	blocks := (n + 7) / 8
	table := make([]float64, blocks*256)
	for b := 0; b < blocks; b++ {
		t := table[b*256 : (b+1)*256]
		for mask := 1; mask < 256; mask++ {
			low := bits.TrailingZeros8(uint8(mask))
			v := 0.0
			if c := b*8 + low; c < n {
				v = p[c]
			}
			t[mask] = t[mask&(mask-1)] + v
		}
	}
	for x := 0; x < n; x++ {
		s := 0.0
		for w, v := range d.anc[x] {
			for k := 0; k < 8 && v != 0; k++ {
				if by := v & 0xff; by != 0 {
					s += table[(w*8+k)*256+int(by)]
				}
				v >>= 8
			}
		}
		q[x] = math.Min(s, 1)
	}
	return q
}
