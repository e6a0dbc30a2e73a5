package culprit

import "slices"

// group is a set of culprits that make the same kernels bad: bad lists
// the measured commits (indexes into the sorted measured list) it makes
// bad; own is the commit whose revert it makes good (−1: none).
type group struct {
	members []int
	// mass is the group's prior, raw its members' weights before
	// they are scaled to it.
	mass, raw float64
	own       int
	// from is, on a chain, the first measured commit it makes bad (its
	// index in the measured list; len for none of them).
	from int
	bad  []int
	none bool
}

// kernels lists the measured commits (sorted) and the commits whose
// revert was measured.
func (w *weigher) kernels() (measured, reverts []int) {
	for kn, s := range w.sums {
		switch {
		case s.boots == 0 || kn.commit == goodEndpoint:
		case kn.reverted:
			reverts = append(reverts, kn.commit)
		default:
			measured = append(measured, kn.commit)
		}
	}
	slices.Sort(measured)
	slices.Sort(reverts)
	return measured, reverts
}

// groups partitions the culprits by the kernels they make bad, and adds
// "none". Each reverted commit is a group of its own. Masses are the
// prior's: the commits' weights share 1 − none.
func (w *weigher) groups(measured, reverts []int) []group {
	n := w.d.Len()
	total := 0.0
	for c := 0; c < n; c++ {
		total += w.weight(c)
	}
	scale := (1 - w.none) / total
	own := map[int]bool{}
	for _, r := range reverts {
		own[r] = true
	}
	var out []group
	if w.d.chain {
		// The culprits in (measured[i−1], measured[i]] make the
		// measured commits from the i-th on bad.
		lo := 0
		for i, x := range measured {
			g := group{own: -1, from: i}
			for c := lo; c <= x; c++ {
				if own[c] {
					out = append(out, group{members: []int{c}, mass: w.weight(c) * scale, own: c, from: i})
					continue
				}
				g.members = append(g.members, c)
				g.mass += w.weight(c) * scale
			}
			if len(g.members) > 0 {
				out = append(out, g)
			}
			lo = x + 1
		}
		if lo < n {
			// Culprits after the last measured commit make none of
			// them bad.
			g := group{own: -1, from: len(measured)}
			for c := lo; c < n; c++ {
				if own[c] {
					out = append(out, group{members: []int{c}, mass: w.weight(c) * scale, own: c, from: len(measured)})
					continue
				}
				g.members = append(g.members, c)
				g.mass += w.weight(c) * scale
			}
			if len(g.members) > 0 {
				out = append(out, g)
			}
		}
	} else {
		of, sigs := w.d.signatures(measured)
		index := make([]int, len(sigs)) // each signature's group, +1
		for c := 0; c < n; c++ {
			sig := sigs[of[c]]
			bad := func() []int {
				var bad []int
				for i := range measured {
					if sig[i/8]&(1<<(i%8)) != 0 {
						bad = append(bad, i)
					}
				}
				return bad
			}
			if own[c] {
				out = append(out, group{members: []int{c}, mass: w.weight(c) * scale, own: c, bad: bad()})
				continue
			}
			gi := index[of[c]] - 1
			if gi < 0 {
				gi = len(out)
				index[of[c]] = gi + 1
				out = append(out, group{own: -1, bad: bad()})
			}
			out[gi].members = append(out[gi].members, c)
			out[gi].mass += w.weight(c) * scale
		}
	}
	var kept []group
	for _, g := range out {
		if g.mass > 0 {
			g.raw = g.mass / scale
			kept = append(kept, g)
		}
	}
	return append(kept, group{mass: w.none, own: -1, none: true, from: len(measured)})
}
