package bisect

import "sort"

// paintDownToCommon is git's paint_down_to_common: it walks down from one
// and twos in date order, painting each commit with the side it is reached
// from, and returns the commits reached from both, newest first, stopping
// when only commits below a common one are left.
func (w *walk) paintDownToCommon(one int32, twos []int32) ([]int32, error) {
	q := &dateQueue{g: w.g}
	if err := w.g.parse(one); err != nil {
		return nil, err
	}
	w.set(one, flagParent1)
	q.put(one)
	for _, t := range twos {
		if err := w.g.parse(t); err != nil {
			return nil, err
		}
		w.set(t, flagParent2)
		q.put(t)
	}
	var result []int32
	for w.queueHasNonstale(q) {
		id := q.pop()
		flags := w.flag(id) & (flagParent1 | flagParent2 | flagStale)
		if flags == flagParent1|flagParent2 {
			if w.flag(id)&flagResult == 0 {
				w.set(id, flagResult)
				result = append(result, id)
			}
			flags |= flagStale
		}
		for _, p := range w.g.nodes[id].parents {
			if w.flag(p)&flags == flags {
				continue
			}
			if err := w.g.parse(p); err != nil {
				return nil, err
			}
			w.set(p, flags)
			q.put(p)
		}
	}
	sortStableByDate(w.g, result)
	return result, nil
}

func (w *walk) queueHasNonstale(q *dateQueue) bool {
	for _, it := range q.items {
		if w.flag(it.id)&flagStale == 0 {
			return true
		}
	}
	return false
}

// mergeBases returns the best common ancestors of one and any of twos,
// newest first, as git's get_merge_bases_many.
func (g *Graph) mergeBases(one int32, twos []int32) ([]int32, error) {
	common, err := newWalk(g).paintDownToCommon(one, twos)
	if err != nil || len(common) < 2 {
		return common, err
	}
	// Drop bases that are ancestors of other bases.
	var keep []int32
	for i, c := range common {
		redundant := false
		for j, o := range common {
			if i == j {
				continue
			}
			anc, err := g.isAncestor(c, o)
			if err != nil {
				return nil, err
			}
			if anc {
				redundant = true
				break
			}
		}
		if !redundant {
			keep = append(keep, c)
		}
	}
	sort.SliceStable(keep, func(i, j int) bool { return g.nodes[keep[i]].date > g.nodes[keep[j]].date })
	return keep, nil
}

// isAncestor reports whether a is an ancestor of b (or b itself), with a
// walk that stops as soon as the answer is known rather than go-git's walk
// of b's whole history.
func (g *Graph) isAncestor(a, b int32) (bool, error) {
	if a == b {
		return true, nil
	}
	common, err := newWalk(g).paintDownToCommon(b, []int32{a})
	if err != nil {
		return false, err
	}
	for _, c := range common {
		if c == a {
			return true, nil
		}
	}
	return false, nil
}
