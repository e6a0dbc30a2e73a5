package drive

import (
	"context"

	"kbisect/culprit"
)

// Older is the Commit of a boot of an older release on the walk back
// (Kernel.Release says which).
const Older = -3

// Walk is the walk back from a good endpoint that calibration found bad
// (Hooks.Stop said so, or the endpoints measured alike) along older
// releases, newest first, to one that measures good: the search then
// starts from it, and every boot of the walk is its evidence.
type Walk struct {
	// Releases is how many older releases there are to try, newest
	// first, each an ancestor of the one before it and of the good
	// endpoint: asked once, when the walk begins.
	Releases func() int
	// Tried hears each release as the walk leaves it or takes it: its
	// index, whether it measured good, and why (culprit.JudgeOlder's
	// line, or the reason a boot of it could not be measured).
	Tried func(i int, good bool, why string)
	// Found hears the release that measured good, before the range is
	// asked for: Options.Range is from then on the range from it to the
	// bad endpoint, and In places the walk's other kernels in it.
	Found func(i int) error
	// In is the index in the new range of release i (-1: the good
	// endpoint the run was given), false when it is not in it.
	In func(i int) (int, bool)
	// Beyond, when set, says why a release that measured apart from the
	// bad endpoint is bad all the same (every boot beyond the job's
	// absolute threshold), "" when it is not.
	Beyond func(boots [][]float64) string
}

// walking is a walk back under way: the releases' boots, in the order
// they ended, and the release now judged.
type walking struct {
	opt Options
	// scale is a machine's samples at the pool's common level (nil: as
	// they are, one machine).
	scale func(machine int, xs []float64) []float64
	bads  [][]float64
	boots [][][]float64
	order []Record
	n, at int
	// found is the release that measured good (-1: none yet), and model
	// the calibration its boots and the bad endpoint's make.
	found int
	model culprit.Model
}

func newWalking(opt Options, bads [][]float64) *walking {
	n := opt.Walk.Releases()
	return &walking{opt: opt, bads: bads, boots: make([][][]float64, n), n: n, found: -1}
}

// done says whether the walk has ended: a release measured good, or
// none is left.
func (w *walking) done() bool { return w.found >= 0 || w.at >= w.n }

// kernel is the next boot of the walk: the release now judged.
func (w *walking) kernel() Kernel { return Kernel{Commit: Older, Release: w.at, Why: WalkingBack} }

// take takes in a boot of release i on machine (one that ended after
// the walk left that release is its evidence all the same), and judges
// the release now judged: good, left, or to be booted again.
func (w *walking) take(machine, i int, b Boot) {
	rec := Record{Kernel: Kernel{Commit: Older, Release: i, Why: WalkingBack}, Boot: b, Machine: machine}
	w.order = append(w.order, rec)
	if w.scale != nil && len(b.Samples) > 0 {
		b.Samples = w.scale(machine, b.Samples)
	}
	if i != w.at || w.done() {
		if !b.Skip && len(b.Samples) > 0 {
			w.boots[i] = append(w.boots[i], b.Samples)
		}
		return
	}
	if b.Skip || len(b.Samples) == 0 {
		w.leave(false, "cannot be measured: "+b.Reason)
		return
	}
	w.boots[i] = append(w.boots[i], b.Samples)
	o, m, why := culprit.JudgeOlder(w.boots[i], w.bads, w.opt.Least)
	if o == culprit.OlderGood && w.opt.Walk.Beyond != nil {
		// The job's threshold: a release every boot of which is beyond
		// it is bad, however far from the bad endpoint.
		if s := w.opt.Walk.Beyond(w.boots[i]); s != "" {
			o, why = culprit.OlderAlike, s
		}
	}
	switch o {
	case culprit.OlderGood:
		w.found, w.model = i, m
		w.leave(true, why)
	case culprit.OlderAlike:
		w.leave(false, why)
	}
}

// leave ends the judging of the release now judged.
func (w *walking) leave(good bool, why string) {
	if w.opt.Walk.Tried != nil {
		w.opt.Walk.Tried(w.at, good, why)
	}
	if !good {
		w.at++
	}
}

// place ends a walk that found a good release: the range is now from it,
// and the boots calibration and the walk took are placed in it — the
// bad endpoint's and the found release's as the new endpoints', the
// others at their commits — in the order they were measured.
func (w *walking) place(calibration []Record) ([]Record, error) {
	if err := w.opt.Walk.Found(w.found); err != nil {
		return nil, err
	}
	var order []Record
	at := func(release int, r Record) {
		if i, ok := w.opt.Walk.In(release); ok {
			r.Kernel = Kernel{Commit: i, Why: Searching}
			order = append(order, r)
		}
	}
	for _, r := range calibration {
		if r.Commit == culprit.GoodEndpoint {
			at(-1, r)
			continue
		}
		order = append(order, r)
	}
	for _, r := range w.order {
		switch {
		case r.Skip || len(r.Samples) == 0:
		case r.Release == w.found:
			r.Kernel = Kernel{Commit: culprit.GoodEndpoint, Why: Calibrating}
			order = append(order, r)
		default:
			at(r.Release, r)
		}
	}
	return order, nil
}

// walkBack walks back on one machine: the resumed run's boots of the
// walk first (taken from the front of hist), then boots of the release
// judged until one measures good or none is left. false (with
// res.NotReproduced kept) when none did.
func walkBack(ctx context.Context, m Machine, opt Options, res *Result, order *[]Record, hist *[]Record) (culprit.Model, bool, error) {
	w := newWalking(opt, res.Bads)
	for len(*hist) > 0 && (*hist)[0].Why == WalkingBack {
		h := (*hist)[0]
		*hist = (*hist)[1:]
		w.take(0, h.Release, h.Boot)
	}
	for !w.done() {
		if err := ctx.Err(); err != nil {
			return culprit.Model{}, false, err
		}
		k := w.kernel()
		b, err := m.Boot(ctx, k, func(v []float64) bool { return len(v) < max(opt.CalibrationSamples, 1) })
		if err != nil {
			return culprit.Model{}, false, err
		}
		w.take(0, k.Release, b)
	}
	if w.found < 0 {
		return culprit.Model{}, false, nil
	}
	placed, err := w.place(*order)
	if err != nil {
		return culprit.Model{}, false, err
	}
	*order = placed
	res.Goods, res.Model, res.NotReproduced = w.boots[w.found], w.model, ""
	if opt.Hooks.Calibrated != nil {
		opt.Hooks.Calibrated(res.Goods, res.Bads, w.model, nil)
	}
	return w.model, true, nil
}
