package culprit

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// DAG is the range's commits, the candidates for the first bad commit, in
// topological order: every commit after its parents. Parents outside the
// range (the good side) are left out. The bad endpoint is the last
// commit, and every commit is its ancestor.
//
// A range with merges keeps each commit's ancestors-or-self as runs of
// consecutive places in a depth-first order from the bad endpoint (each
// commit placed once all its parents are, its first parent's side first).
// On a kernel's history a commit's ancestors are the main line up to
// where its branch forked plus its branch so far: a few runs each, so the
// memory grows with the range, not with its square (a 750,000-commit
// range of a generated kernel history: 3.1 runs a commit, 25 at most).
// Only when the runs would take more memory than one bit per pair of
// commits (many criss-crossed branches) are bitsets kept instead.
type DAG struct {
	parents [][]int32
	chain   bool
	// place is each commit's place in the depth-first order, and at the
	// commit at each place; both nil when the commits come in that order.
	place, at []int32
	// runs[from[k]:from[k+1]] are the ancestors-or-self of the commit at
	// place k, as pairs of first and last place.
	from, runs []int32
	// anc holds each commit's ancestors-or-self as a bitset, in place of
	// the runs, when those would be larger.
	words int
	anc   [][]uint64
}

// Chain is a linear range of n commits: each the parent of the next.
func Chain(n int) *DAG {
	d := &DAG{parents: make([][]int32, n), chain: true}
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
	d := &DAG{parents: make([][]int32, n), chain: true}
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
	if !d.chain {
		d.order()
		if !d.spans(len(parents) * ((len(parents) + 63) / 64) * 2) {
			d.bitsets()
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
	switch {
	case d.chain:
		return a <= b
	case d.anc != nil:
		return d.anc[b][a/64]&(1<<(a%64)) != 0
	}
	pa, rs := d.placeOf(a), d.runsOf(b)
	// The last run starting at or before a's place holds it, or none does.
	lo, hi := 0, len(rs)/2
	for lo < hi {
		m := (lo + hi) / 2
		if rs[2*m] <= pa {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo > 0 && pa <= rs[2*lo-1]
}

func (d *DAG) placeOf(c int) int32 {
	if d.place == nil {
		return int32(c)
	}
	return d.place[c]
}

func (d *DAG) commitAt(k int32) int {
	if d.at == nil {
		return int(k)
	}
	return int(d.at[k])
}

func (d *DAG) runsOf(c int) []int32 {
	k := d.placeOf(c)
	return d.runs[d.from[k]:d.from[k+1]]
}

// order places the commits depth first from the bad endpoint, each once
// its parents are, the first parent's side first. A range read from git
// comes in this order already, and keeps no permutation.
func (d *DAG) order() {
	n := len(d.parents)
	at := make([]int32, 0, n)
	seen := make([]bool, n)
	type frame struct {
		c    int32
		next int
	}
	stack := []frame{{c: int32(n - 1)}}
	seen[n-1] = true
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if ps := d.parents[top.c]; top.next < len(ps) {
			p := ps[top.next]
			top.next++
			if !seen[p] {
				seen[p] = true
				stack = append(stack, frame{c: p})
			}
			continue
		}
		at = append(at, top.c)
		stack = stack[:len(stack)-1]
	}
	same := true
	for k, c := range at {
		if int(c) != k {
			same = false
			break
		}
	}
	if same {
		return
	}
	d.at = at
	d.place = make([]int32, n)
	for k, c := range at {
		d.place[c] = int32(k)
	}
}

// spans makes each commit's runs from its parents', in place order (a
// parent is always placed before its child). It gives up, and keeps
// nothing, when they would take more than limit int32s (NewDAG's limit is
// the bitsets' size).
func (d *DAG) spans(limit int) bool {
	n := len(d.parents)
	d.from = make([]int32, n+1)
	var runs, cur, next []int32
	for k := 0; k < n; k++ {
		cur = append(cur[:0], int32(k), int32(k))
		for _, p := range d.parents[d.commitAt(int32(k))] {
			next = unite(next[:0], cur, d.runsOfPlaced(runs, d.placeOf(int(p))))
			cur, next = next, cur
		}
		runs = append(runs, cur...)
		if len(runs) > limit {
			d.from = nil
			return false
		}
		d.from[k+1] = int32(len(runs))
	}
	d.runs = runs
	return true
}

func (d *DAG) runsOfPlaced(runs []int32, k int32) []int32 {
	return runs[d.from[k]:d.from[k+1]]
}

// unite appends to out the union of two sorted lists of runs, joining
// runs that touch.
func unite(out, a, b []int32) []int32 {
	for len(a) > 0 || len(b) > 0 {
		var lo, hi int32
		if len(b) == 0 || (len(a) > 0 && a[0] <= b[0]) {
			lo, hi, a = a[0], a[1], a[2:]
		} else {
			lo, hi, b = b[0], b[1], b[2:]
		}
		if k := len(out); k > 0 && lo <= out[k-1]+1 {
			out[k-1] = max(out[k-1], hi)
			continue
		}
		out = append(out, lo, hi)
	}
	return out
}

// bitsets keeps every commit's ancestors-or-self as one bit a commit.
func (d *DAG) bitsets() {
	d.words = (len(d.parents) + 63) / 64
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
	switch {
	case d.chain:
		for c := 0; c <= i; c++ {
			f(c)
		}
	case d.anc != nil:
		for w, v := range d.anc[i] {
			for v != 0 {
				b := bits.TrailingZeros64(v)
				f(w*64 + b)
				v &= v - 1
			}
		}
	default:
		rs := d.runsOf(i)
		for r := 0; r < len(rs); r += 2 {
			for k := rs[r]; k <= rs[r+1]; k++ {
				f(d.commitAt(k))
			}
		}
	}
}

// badness is, for every commit x, the probability that x is bad: the
// mass of the culprits among its ancestors-or-self. On a chain it is a
// running sum; on a range with merges, the sum over x's runs of the
// running sums in place order, kept in two floats (a sum and its rounding
// error) so that a run's mass is exact to the last bit even where it is
// tiny beside the mass before it.
func (d *DAG) badness(p []float64) []float64 {
	n := len(p)
	q := make([]float64, n)
	switch {
	case d.chain:
		s := 0.0
		for i, v := range p {
			s += v
			q[i] = math.Min(s, 1)
		}
		return q
	case d.anc != nil:
		return d.badnessOfBits(p, q)
	}
	sum := make([]float64, 2*(n+1)) // the running sum before each place: high, low
	var hi, lo float64
	for k := 0; k < n; k++ {
		s, e := twoSum(hi, p[d.commitAt(int32(k))])
		hi, lo = twoSum(s, lo+e)
		sum[2*k+2], sum[2*k+3] = hi, lo
	}
	for x := 0; x < n; x++ {
		rs := d.runsOf(x)
		s := 0.0
		for r := 0; r < len(rs); r += 2 {
			a, b := 2*rs[r], 2*rs[r+1]+2
			h, e := twoSum(sum[b], -sum[a])
			s += h + (e + (sum[b+1] - sum[a+1]))
		}
		q[x] = math.Min(s, 1)
	}
	return q
}

// twoSum is a+b and the rounding error of that sum.
func twoSum(a, b float64) (s, e float64) {
	s = a + b
	bb := s - a
	return s, (a - (s - bb)) + (b - bb)
}

// badnessOfBits sums each ancestor bitset a byte at a time from tables
// of the 256 sums of each 8 commits' masses.
func (d *DAG) badnessOfBits(p, q []float64) []float64 {
	n := len(p)
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

// signatures says, for every commit c, which of the commits xs (sorted)
// c would make bad as the culprit: the set of i with c an ancestor of
// xs[i], as a bitset (one bit an index) in sigs, numbered by of[c]. With
// runs the set changes only where one of xs's runs begins or ends, so
// the commits are swept once in place order; with bitsets each commit is
// asked of each x.
func (d *DAG) signatures(xs []int) (of []int32, sigs []string) {
	n := len(d.parents)
	of = make([]int32, n)
	ids := map[string]int32{}
	set := make([]byte, (len(xs)+7)/8)
	id := func() int32 {
		k, ok := ids[string(set)]
		if !ok {
			k = int32(len(sigs))
			ids[string(set)] = k
			sigs = append(sigs, string(set))
		}
		return k
	}
	if d.runs == nil {
		for c := range of {
			clear(set)
			for i, x := range xs {
				if d.IsAncestor(c, x) {
					set[i/8] |= 1 << (i % 8)
				}
			}
			of[c] = id()
		}
		return of, sigs
	}
	// Each run of xs[i] turns bit i on at its first place and off after
	// its last; a commit's runs are apart, so a bit is on in one at most.
	type edge struct{ at, i int32 }
	var edges []edge
	for i, x := range xs {
		rs := d.runsOf(x)
		for r := 0; r < len(rs); r += 2 {
			edges = append(edges, edge{rs[r], int32(i)}, edge{rs[r+1] + 1, int32(i)})
		}
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Compare(a.at, b.at) })
	k := int32(0)
	for e := 0; e <= len(edges); {
		next := int32(n)
		if e < len(edges) {
			next = edges[e].at
		}
		if k < next {
			sig := id()
			for ; k < next; k++ {
				of[d.commitAt(k)] = sig
			}
		}
		for ; e < len(edges) && edges[e].at == next; e++ {
			set[edges[e].i/8] ^= 1 << (edges[e].i % 8)
		}
		if e == len(edges) && next == int32(n) {
			break
		}
	}
	return of, sigs
}
