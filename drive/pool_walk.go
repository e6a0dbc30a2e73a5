package drive

import (
	"context"
	"fmt"

	"kbisect/culprit"
)

// beginWalk begins the walk back of a pool whose calibration found the
// good endpoint bad: each machine's level as its endpoints put it (both
// measure alike, so its level is the bad endpoint's), the older
// releases' boots taken at it.
func (r *pooled) beginWalk(bads [][]float64) {
	r.fixLevels()
	r.walk = newWalking(r.opt, bads)
	r.walk.scale = r.scaled
	r.ended = false
}

// walkBack keeps every machine booting the release the walk judges (a
// machine whose level is not known yet boots the endpoint it lacks
// first) until one measures good, and the search is made, or none is
// left (the run ends not reproduced).
func (r *pooled) walkBack(ctx context.Context) error {
	n := max(r.opt.CalibrationSamples, 1)
	fixed := func(v []float64) bool { return len(v) < n }
	for r.s == nil && !r.ended {
		for j := range r.busy {
			if r.busy[j] != nil || r.lost[j] {
				continue
			}
			k := r.walk.kernel()
			if !r.known[j] {
				k = Kernel{Commit: culprit.GoodEndpoint, Why: Calibrating}
				if len(r.ends[j][1]) == 0 {
					k.Commit = r.d.Len() - 1
				}
			}
			r.busy[j] = &poolBoot{k: k}
			r.p.Start(j, k, fixed)
		}
		i, b, err := r.wait(ctx)
		if err != nil {
			return err
		}
		if i < 0 {
			continue
		}
		k := r.busy[i].k
		r.busy[i] = nil
		if err := r.walkBoot(i, k, b); err != nil {
			return err
		}
	}
	return nil
}

// walkBoot takes in a boot of the walk back on machine i: an older
// release's, or an endpoint's that sets the machine's level.
func (r *pooled) walkBoot(i int, k Kernel, b Boot) error {
	if k.Why != WalkingBack {
		side, which := 1, "bad"
		if k.Commit == culprit.GoodEndpoint {
			side, which = 0, "good"
		}
		if b.Skip || len(b.Samples) == 0 {
			return fmt.Errorf("the %s endpoint cannot be measured on machine %d: %s", which, i, b.Reason)
		}
		r.ends[i][side] = append(r.ends[i][side], b.Samples)
		r.learnLevel(i)
		return nil
	}
	r.walk.take(i, k.Release, b)
	switch {
	case !r.walk.done():
		return nil
	case r.walk.found < 0:
		r.ended = true
		return nil
	}
	return r.walked()
}

// walked makes the search once the walk found a good release: the range
// from it, each machine's level from its boots of it and of the bad
// endpoint, the walk's other boots evidence at their commits, and the
// boots under way relabelled for the new range.
func (r *pooled) walked() error {
	var calibration []Record
	for _, e := range r.order {
		c := BadEndpoint
		if e.commit == culprit.GoodEndpoint {
			c = culprit.GoodEndpoint
		}
		calibration = append(calibration, Record{Kernel: Kernel{Commit: c, Why: Calibrating}, Boot: Boot{Samples: e.samples}, Machine: e.machine})
	}
	w := r.walk
	placed, err := w.place(calibration)
	if err != nil {
		return err
	}
	d, err := r.opt.Range()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRange, err)
	}
	oldBad := r.d.Len() - 1
	r.d = d
	for _, b := range r.busy {
		if b != nil {
			b.k = r.relabel(b.k, oldBad)
		}
	}
	r.order, r.ends = nil, make([][2][][]float64, len(r.ends))
	clear(r.known)
	var rest []Record
	for _, p := range placed {
		if p.Why != Calibrating {
			rest = append(rest, p)
			continue
		}
		side, c := 0, culprit.GoodEndpoint
		if p.Commit != culprit.GoodEndpoint {
			side, c = 1, d.Len()-1
		}
		r.ends[p.Machine][side] = append(r.ends[p.Machine][side], p.Samples)
		r.order = append(r.order, endBoot{p.Machine, c, p.Samples})
	}
	r.fixLevels()
	so := r.opt.Search
	if r.opt.StartCosts != nil {
		so.Costs = r.opt.StartCosts()
	}
	if r.s, err = culprit.New(d, w.model, so); err != nil {
		return err
	}
	r.res.Search = r.s
	r.res.Goods, r.res.Bads = r.pooledEnds()
	r.res.Model, r.res.NotReproduced = w.model, ""
	for _, b := range r.order {
		if r.known[b.machine] {
			r.s.ObserveAt(b.commit, r.scaled(b.machine, b.samples))
		}
	}
	for _, p := range rest {
		if r.known[p.Machine] {
			r.s.ObserveAt(p.Commit, r.scaled(p.Machine, p.Samples))
		}
	}
	h := r.opt.Hooks
	if h.Calibrated != nil {
		h.Calibrated(r.res.Goods, r.res.Bads, w.model, nil)
	}
	if h.Started != nil {
		h.Started(r.s)
	}
	return nil
}

// relabel is a boot of the walk still under way when it found a good
// release, as the new range has it: the found release's boots are the
// good endpoint's, the bad endpoint's keep their kind at its new index,
// and the others are evidence at their commits (Searching, with no step:
// observed where they ended; Older when not in the range, then dropped).
// oldBad is the bad endpoint's index in the range the walk left (-1:
// none, the kernel already names the new one).
func (r *pooled) relabel(k Kernel, oldBad int) Kernel {
	at := func(release int) Kernel {
		if i, ok := r.opt.Walk.In(release); ok {
			return Kernel{Commit: i, Why: Searching}
		}
		return Kernel{Commit: Older, Why: Searching}
	}
	switch {
	case k.Why == WalkingBack && k.Release == r.walk.found:
		return Kernel{Commit: culprit.GoodEndpoint, Why: Calibrating}
	case k.Why == WalkingBack:
		return at(k.Release)
	case k.Commit == culprit.GoodEndpoint:
		return at(-1)
	case k.Commit == oldBad:
		return Kernel{Commit: r.d.Len() - 1, Why: Calibrating}
	}
	return k
}
