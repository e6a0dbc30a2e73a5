package bisect

import (
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
)

// Range is the commits a bisection searches, as a noise-robust search
// needs them: every commit reachable from the bad revision and from none
// of the good ones (with firstParent, along first parents only), parents
// before children and the bad revision last, with each commit's parents
// among them as indexes.
type Range struct {
	Commits []plumbing.Hash
	Parents [][]int
}

// Range lists the commits between the good revisions and the bad one.
func (g *Graph) Range(bad plumbing.Hash, goods []plumbing.Hash, firstParent bool) (*Range, error) {
	w := newWalk(g)
	tips := []tip{{id: g.id(bad)}}
	for _, h := range goods {
		tips = append(tips, tip{id: g.id(h), uninteresting: true})
	}
	limited, err := w.limitList(tips, firstParent)
	if err != nil {
		return nil, err
	}
	in := map[int32]bool{}
	for _, id := range limited {
		if w.flag(id)&flagUninteresting == 0 {
			in[id] = true
		}
	}
	badID := g.id(bad)
	if !in[badID] {
		return nil, fmt.Errorf("%s is reachable from a good revision: no commit is left to search", bad)
	}
	parentsOf := func(id int32) []int32 {
		ps := g.nodes[id].parents
		if firstParent && len(ps) > 1 {
			ps = ps[:1]
		}
		return ps
	}
	// Depth-first from the bad revision, each commit after its parents:
	// an explicit stack, for ranges of a million commits.
	index := map[int32]int{}
	r := &Range{}
	type frame struct {
		id   int32
		next int
	}
	stack := []frame{{id: badID}}
	seen := map[int32]bool{badID: true}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		ps := parentsOf(top.id)
		if top.next < len(ps) {
			p := ps[top.next]
			top.next++
			if in[p] && !seen[p] {
				seen[p] = true
				stack = append(stack, frame{id: p})
			}
			continue
		}
		id := top.id
		stack = stack[:len(stack)-1]
		index[id] = len(r.Commits)
		r.Commits = append(r.Commits, g.nodes[id].hash)
		var own []int
		for _, p := range ps {
			if i, ok := index[p]; ok && in[p] {
				own = append(own, i)
			}
		}
		r.Parents = append(r.Parents, own)
	}
	return r, nil
}
