package bisect

import (
	"bytes"
	"sort"
)

// bisection is the result of git's find_bisection over a limited list.
type bisection struct {
	// order is the candidate list: the best commit alone, or with all set,
	// every candidate sorted by descending distance as git's
	// best_bisection_sorted does.
	order []int32
	// reaches is the number of candidates the first commit of order reaches.
	reaches int
	// all is the number of candidates.
	all int
}

// findBisection is git's find_bisection and do_find_bisection: weights,
// the early return near the halfway point, and the choice of the best
// commit in the same list order git uses, so that it picks the same commit.
func (w *walk) findBisection(limited []int32, all, firstParent bool) bisection {
	// Drop commits marked uninteresting after they were listed, and
	// reverse: git works on the oldest-first list.
	list := make([]int32, 0, len(limited))
	for i := len(limited) - 1; i >= 0; i-- {
		if w.flag(limited[i])&flagUninteresting == 0 {
			list = append(list, limited[i])
		}
	}
	nr := len(list)
	res := bisection{all: nr}
	if nr == 0 {
		return res
	}
	// weight by node; -3 marks commits that are not candidates.
	weight := make([]int32, len(w.g.nodes))
	for i := range weight {
		weight[i] = -3
	}

	counted := 0
	for _, id := range list {
		switch w.countInterestingParents(id, firstParent) {
		case 0:
			weight[id] = 1
			counted++
		case 1:
			weight[id] = -1
		default:
			weight[id] = -2
		}
	}

	done := func(id int32) bisection {
		res.order = []int32{id}
		res.reaches = int(weight[id])
		return res
	}

	// Merges first: their weight needs a full count of what they reach.
	var visit visitMarks
	for _, id := range list {
		if weight[id] != -2 {
			continue
		}
		weight[id] = w.countDistance(id, &visit)
		if !all && approxHalfway(weight[id], nr) {
			return done(id)
		}
		counted++
	}

	// Then single-parent commits: one more than their counted parent, in
	// repeated passes over the list as git does.
	for counted < nr {
		for _, id := range list {
			if weight[id] >= 0 {
				continue
			}
			known := int32(-1)
			for _, p := range w.g.nodes[id].parents {
				if w.flag(p)&flagUninteresting == 0 {
					if pw := weight[p]; pw >= 0 {
						known = pw
						break
					}
				}
				if firstParent {
					break
				}
			}
			if known < 0 {
				continue
			}
			weight[id] = known + 1
			counted++
			if !all && approxHalfway(weight[id], nr) {
				return done(id)
			}
		}
	}

	if !all {
		best, bestDist := list[0], int32(-1)
		for _, id := range list {
			d := distance(weight[id], nr)
			if d > bestDist {
				best, bestDist = id, d
			}
		}
		return done(best)
	}

	sorted := append([]int32(nil), list...)
	sort.Slice(sorted, func(i, j int) bool {
		di, dj := distance(weight[sorted[i]], nr), distance(weight[sorted[j]], nr)
		if di != dj {
			return di > dj
		}
		hi, hj := w.g.nodes[sorted[i]].hash, w.g.nodes[sorted[j]].hash
		return bytes.Compare(hi[:], hj[:]) < 0
	})
	res.order = sorted
	res.reaches = int(weight[sorted[0]])
	return res
}

func distance(weight int32, nr int) int32 {
	if d := int32(nr) - weight; d < weight {
		return d
	}
	return weight
}

// approxHalfway is git's approx_halfway: exactly halfway for small lists,
// within about 0.1% of it for large ones.
func approxHalfway(weight int32, nr int) bool {
	diff := 2*int(weight) - nr
	if diff >= -1 && diff <= 1 {
		return true
	}
	if diff < 0 {
		diff = -diff
	}
	return diff < nr/1024
}

func (w *walk) countInterestingParents(id int32, firstParent bool) int {
	n := 0
	for _, p := range w.g.nodes[id].parents {
		if w.flag(p)&flagUninteresting == 0 {
			n++
		}
		if firstParent {
			break
		}
	}
	return n
}

// visitMarks replaces git's COUNTED flag and clear_distance: a stamp per
// count, so clearing is free.
type visitMarks struct {
	stamp []uint32
	cur   uint32
	stack []int32
}

// countDistance is git's count_distance: the number of interesting
// commits id reaches, itself included.
func (w *walk) countDistance(id int32, v *visitMarks) int32 {
	v.cur++
	if len(v.stamp) < len(w.g.nodes) {
		v.stamp = append(v.stamp, make([]uint32, len(w.g.nodes)-len(v.stamp))...)
	}
	n := int32(0)
	v.stack = append(v.stack[:0], id)
	for len(v.stack) > 0 {
		c := v.stack[len(v.stack)-1]
		v.stack = v.stack[:len(v.stack)-1]
		if v.stamp[c] == v.cur || w.flag(c)&flagUninteresting != 0 {
			continue
		}
		v.stamp[c] = v.cur
		n++
		v.stack = append(v.stack, w.g.nodes[c].parents...)
	}
	return n
}
