package bisect

import (
	"github.com/go-git/go-git/v5/plumbing"
)

// RangeCommits lists the commits a bisection between bad and goods
// chooses from, as git's rev-list does (bad ^goods; with firstParent,
// only first parents are followed from bad): parents before children,
// bad last. Each commit's parents within the range come as indexes into
// the list; parents outside it (the good side) are left out. Every
// commit listed is an ancestor of bad. An empty list means bad is
// reachable from a good revision.
func (g *Graph) RangeCommits(bad plumbing.Hash, goods []plumbing.Hash, firstParent bool) ([]plumbing.Hash, [][]int, error) {
	w := newWalk(g)
	badID := g.id(bad)
	tips := []tip{{id: badID}}
	for _, h := range goods {
		tips = append(tips, tip{id: g.id(h), uninteresting: true})
	}
	limited, err := w.limitList(tips, firstParent)
	if err != nil {
		return nil, nil, err
	}
	in := map[int32]bool{}
	for _, id := range limited {
		if w.flag(id)&flagUninteresting == 0 {
			in[id] = true
		}
	}
	if !in[badID] {
		return nil, nil, nil
	}
	parentsOf := func(id int32) ([]int32, error) {
		if err := g.parse(id); err != nil {
			return nil, err
		}
		ps := g.nodes[id].parents
		if firstParent && len(ps) > 1 {
			ps = ps[:1]
		}
		return ps, nil
	}
	// Depth first from bad, each commit listed once all its parents in
	// the range are: a topological order, the same for the same graph.
	type frame struct {
		id      int32
		parents []int32
		next    int
	}
	index := map[int32]int{}
	var order []int32
	ps, err := parentsOf(badID)
	if err != nil {
		return nil, nil, err
	}
	seen := map[int32]bool{badID: true}
	stack := []frame{{id: badID, parents: ps}}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.next < len(top.parents) {
			p := top.parents[top.next]
			top.next++
			if !in[p] || seen[p] {
				continue
			}
			seen[p] = true
			pps, err := parentsOf(p)
			if err != nil {
				return nil, nil, err
			}
			stack = append(stack, frame{id: p, parents: pps})
			continue
		}
		index[top.id] = len(order)
		order = append(order, top.id)
		stack = stack[:len(stack)-1]
	}
	hashes := make([]plumbing.Hash, len(order))
	parents := make([][]int, len(order))
	for i, id := range order {
		hashes[i] = g.nodes[id].hash
		ps, _ := parentsOf(id)
		for _, p := range ps {
			if k, ok := index[p]; ok {
				parents[i] = append(parents[i], k)
			}
		}
	}
	return hashes, parents, nil
}
