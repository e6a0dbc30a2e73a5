package bisect

import (
	"container/heap"
	"math"
)

// Flags of one walk, as git's object flags of the same names.
const (
	flagSeen uint8 = 1 << iota
	flagAdded
	flagUninteresting
	flagCounted
	flagParent1
	flagParent2
	flagStale
	flagResult
)

// slop is git's SLOP: how many uninteresting commits older than the newest
// interesting one limit_list looks at before it trusts commit dates.
const slop = 5

// walk holds the per-commit flags of one revision walk over a Graph.
type walk struct {
	g     *Graph
	flags []uint8
}

func newWalk(g *Graph) *walk {
	return &walk{g: g, flags: make([]uint8, len(g.nodes), len(g.nodes)+1024)}
}

func (w *walk) flag(id int32) uint8 {
	if int(id) >= len(w.flags) {
		return 0
	}
	return w.flags[id]
}

func (w *walk) set(id int32, f uint8) {
	for int(id) >= len(w.flags) {
		w.flags = append(w.flags, 0)
	}
	w.flags[id] |= f
}

// dateQueue pops the newest commit first and, among equal dates, the one
// queued first: exactly the order of git's commit_list_insert_by_date list.
type dateQueue struct {
	g     *Graph
	items []queued
	seq   uint64
}

type queued struct {
	id   int32
	date int64
	seq  uint64
}

func (q *dateQueue) Len() int { return len(q.items) }
func (q *dateQueue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if a.date != b.date {
		return a.date > b.date
	}
	return a.seq < b.seq
}
func (q *dateQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *dateQueue) Push(x any)    { q.items = append(q.items, x.(queued)) }
func (q *dateQueue) Pop() any {
	it := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return it
}

func (q *dateQueue) put(id int32) {
	q.seq++
	heap.Push(q, queued{id: id, date: q.g.nodes[id].date, seq: q.seq})
}

func (q *dateQueue) pop() int32 { return heap.Pop(q).(queued).id }

// markParentsUninteresting is git's mark_parents_uninteresting: it marks
// every ancestor already parsed, stopping at commits already marked.
func (w *walk) markParentsUninteresting(id int32) {
	var stack []int32
	mark := func(p int32) {
		if w.flag(p)&flagUninteresting != 0 {
			return
		}
		w.set(p, flagUninteresting)
		stack = append(stack, w.g.nodes[p].parents...)
	}
	for _, p := range w.g.nodes[id].parents {
		mark(p)
	}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		mark(p)
	}
}

// processParents is git's process_parents for a limited walk.
func (w *walk) processParents(id int32, q *dateQueue, firstParent bool) error {
	if w.flag(id)&flagAdded != 0 {
		return nil
	}
	w.set(id, flagAdded)
	if w.flag(id)&flagUninteresting != 0 {
		for _, p := range w.g.nodes[id].parents {
			w.set(p, flagUninteresting)
			if err := w.g.parse(p); err != nil {
				return err
			}
			if len(w.g.nodes[p].parents) > 0 {
				w.markParentsUninteresting(p)
			}
			if w.flag(p)&flagSeen != 0 {
				continue
			}
			w.set(p, flagSeen)
			q.put(p)
		}
		return nil
	}
	for _, p := range w.g.nodes[id].parents {
		if err := w.g.parse(p); err != nil {
			return err
		}
		if w.flag(p)&flagSeen == 0 {
			w.set(p, flagSeen)
			q.put(p)
		}
		if firstParent {
			break
		}
	}
	return nil
}

// tip is one starting point of a walk: a commit, or with uninteresting set
// a commit whose ancestors are excluded ("^rev").
type tip struct {
	id            int32
	uninteresting bool
}

// limitList is git's prepare_revision_walk followed by limit_list: the
// commits reachable from the interesting tips and from none of the
// uninteresting ones, in git's pop order. Commits marked uninteresting
// after they were listed stay in the result; callers drop them by flag.
func (w *walk) limitList(tips []tip, firstParent bool) ([]int32, error) {
	q := &dateQueue{g: w.g}
	var start []int32
	for _, t := range tips {
		if err := w.g.parse(t.id); err != nil {
			return nil, err
		}
		if t.uninteresting {
			w.set(t.id, flagUninteresting)
			w.markParentsUninteresting(t.id)
		}
		if w.flag(t.id)&flagSeen == 0 {
			w.set(t.id, flagSeen)
			start = append(start, t.id)
		}
	}
	// A stable sort by date, newest first, then the walk in queue order.
	sortStableByDate(w.g, start)
	for _, id := range start {
		q.put(id)
	}

	var list []int32
	date := int64(math.MaxInt64)
	left := slop
	interesting := int32(-1) // git's interesting_cache
	for q.Len() > 0 {
		id := q.pop()
		if id == interesting {
			interesting = -1
		}
		if err := w.processParents(id, q, firstParent); err != nil {
			return nil, err
		}
		if w.flag(id)&flagUninteresting != 0 {
			w.markParentsUninteresting(id)
			left = w.stillInteresting(q, date, left, &interesting)
			if left > 0 {
				continue
			}
			break
		}
		date = w.g.nodes[id].date
		list = append(list, id)
	}
	return list, nil
}

func (w *walk) stillInteresting(q *dateQueue, date int64, left int, cache *int32) int {
	if q.Len() == 0 {
		return 0
	}
	if date <= q.items[0].date {
		return slop
	}
	if !w.everybodyUninteresting(q, cache) {
		return slop
	}
	return left - 1
}

func (w *walk) everybodyUninteresting(q *dateQueue, cache *int32) bool {
	if *cache >= 0 && w.flag(*cache)&flagUninteresting == 0 {
		return false
	}
	for _, it := range q.items {
		if w.flag(it.id)&flagUninteresting == 0 {
			*cache = it.id
			return false
		}
	}
	return true
}

func sortStableByDate(g *Graph, ids []int32) {
	// Insertion sort: a handful of tips, and stability is what matters.
	for i := 1; i < len(ids); i++ {
		for j := i; j > 0 && g.nodes[ids[j]].date > g.nodes[ids[j-1]].date; j-- {
			ids[j], ids[j-1] = ids[j-1], ids[j]
		}
	}
}
