package simulate

import (
	"fmt"
	"math/rand/v2"

	"kbisect/culprit"
)

// history is the range one simulated bisection searches: its commits as
// a DAG (parents first, the bad endpoint last), the first bad commit,
// the commits whose kernel does not build and those whose revert does not
// apply on the bad endpoint. nil dag is a line of commits that all build
// and revert.
type history struct {
	dag     *culprit.DAG
	culprit int
	broken  map[int]bool
	// reverts says whether a commit's revert applies (nil: every one).
	reverts func(int) bool
}

// bad says whether commit c is bad: the culprit or one of its
// descendants (the good endpoint, −1, never is).
func (h *history) bad(c int) bool {
	switch {
	case c < 0:
		return false
	case h.dag == nil || h.dag.IsChain():
		return c >= h.culprit
	}
	return h.dag.IsAncestor(h.culprit, c)
}

// Shape is the range's shape beyond a line of commits that all build:
// shares of the commits.
type Shape struct {
	// Merges is the share of the mainline's commits that merge a topic
	// branch (of 1–8 commits, forked up to 16 mainline commits back) into
	// it: 10 % makes about 7 % of all commits merges.
	Merges float64
	// Broken is the share of the commits whose kernel does not build:
	// the search skips them.
	Broken float64
	// NoRevert is the share of the commits whose revert does not apply
	// on the bad endpoint: the confirmation goes on without the revert.
	NoRevert float64
}

// none says the shape is a line of commits that all build and revert.
func (s Shape) none() bool { return s == Shape{} }

// newHistory draws a range of n commits of the shape, its first bad
// commit one that builds and is not a merge, from rng: pick, unless it
// cannot be.
func newHistory(n int, s Shape, pick int, rng *rand.Rand) (*history, error) {
	parents := make([][]int, 0, n)
	merge := map[int]bool{}
	var mainline []int // the mainline's commits, in order
	add := func(ps ...int) int {
		parents = append(parents, ps)
		return len(parents) - 1
	}
	tip := func() []int {
		if len(mainline) == 0 {
			return nil
		}
		return []int{mainline[len(mainline)-1]}
	}
	for len(parents) < n {
		length := 1 + rng.IntN(8)
		if len(mainline) == 0 || len(parents)+length+2 > n || rng.Float64() >= s.Merges {
			mainline = append(mainline, add(tip()...))
			continue
		}
		// A topic branch forked from a mainline commit up to 16 back (or
		// from the good endpoint), merged into the mainline's tip.
		back := rng.IntN(min(16, len(mainline)) + 1)
		var from []int
		if back < len(mainline) {
			from = []int{mainline[len(mainline)-1-back]}
		}
		for k := 0; k < length; k++ {
			from = []int{add(from...)}
		}
		m := add(append(tip(), from[0])...)
		merge[m] = true
		mainline = append(mainline, m)
	}
	d, err := culprit.NewDAG(parents)
	if err != nil {
		return nil, fmt.Errorf("simulate: a generated history is not a DAG: %w", err)
	}
	h := &history{dag: d, broken: map[int]bool{}}
	for c := 0; c < n-1; c++ {
		if rng.Float64() < s.Broken {
			h.broken[c] = true
		}
	}
	noRevert := map[int]bool{}
	for c := 0; c < n; c++ {
		if rng.Float64() < s.NoRevert {
			noRevert[c] = true
		}
	}
	h.reverts = func(c int) bool { return !noRevert[c] }
	var can []int // what the culprit can be
	for c := 0; c < n; c++ {
		if !h.broken[c] && !merge[c] {
			can = append(can, c)
		}
	}
	switch {
	case !h.broken[pick] && !merge[pick]:
		h.culprit = pick
	case len(can) > 0:
		h.culprit = can[rng.IntN(len(can))]
	default:
		h.culprit = n - 1 // every other commit is broken; the last builds
	}
	return h, nil
}
