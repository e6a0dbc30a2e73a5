package drive

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"kbisect/culprit"
)

// Pool is several machines of one lab that boot at once: one commit on
// each. A machine is free until Start gives it a boot, and free again
// once Wait has returned that boot.
type Pool interface {
	// Machines is how many machines the pool has, numbered from 0.
	Machines() int
	// Start begins a boot of k on free machine i, taking samples while
	// more says so.
	Start(i int, k Kernel, more func(samples []float64) bool)
	// Wait returns the next boot to end, in the order they end: its
	// machine and what it made, or the lab's error: one that wraps
	// ErrMachineLost ends that machine for the run (its boot is not
	// taken in, and the others go on); any other stops the run.
	Wait(ctx context.Context) (int, Boot, error)
}

// Builds is what a Pool may also say: whether the kernel of machine i's
// boot under way is built now (in the cache), so that another machine
// would boot it without waiting for its build.
type Builds interface {
	KernelBuilt(i int) bool
}

// PoolScale is how one machine's forecast of the rest of a search
// (culprit.Search.Forecast) reads on k machines, as kbisect simulate
// --machines measured them (docs/bisection.md, "Several machines, one
// posterior"): the seconds times Seconds (0.25 + 0.75/k; measured 0.60
// to 0.61 of one machine's wall time on 2, 0.41 to 0.45 on 4, on the
// easy and the noisy rows — calibration and confirmation divide by the
// machines, the search less), the low end of their range times
// SecondsLow (1/k: k machines divide one's boots by k at best, and late
// in a run the rest is mostly confirmation, which divides that well),
// and the boots (and the high end of their range) times Boots (1 + 0.2
// (k − 1): a pool boots more than one machine, 46.3 against 38.3 boots
// on 2 and 66.4 on 4 on the easy row, 59.7 against 52.0 and 79.6 on the
// noisy one).
type PoolScale struct{ Seconds, SecondsLow, Boots float64 }

// PoolShare is the PoolScale of k machines.
func PoolShare(k int) PoolScale {
	if k <= 1 {
		return PoolScale{1, 1, 1}
	}
	return PoolScale{Seconds: 0.25 + 0.75/float64(k), SecondsLow: 1 / float64(k), Boots: 1 + 0.2*float64(k-1)}
}

// ErrMachineLost marks a machine's error that ends it for the run (it
// stopped answering) while the pool's other machines go on.
var ErrMachineLost = errors.New("the machine is lost for this run")

// RunPool calibrates on the endpoints, searches the range and confirms
// the answer with every machine of the pool booting at once, into one
// posterior. Machines are alike, not the same: each boots both endpoints
// first, and its samples are taken at the level its own endpoints put it
// (on the log scale, the midpoint of its good and bad boots against the
// machines' mean). While other machines measure, a free machine boots
// the commit whose boot tells the most per second beside the boots under
// way, each weighed as the model says boots err (culprit's Beside: a
// commit under way again, or a new split), or what the search itself
// asks when none tells enough or it is an endpoint, a revert or a
// confirmation. Boots still
// under way when the search ends are left to the caller to stop.
//
// opt.History (each record with its Machine) is taken in first, in the
// order the boots ended, as if they had just ended: a resumed pool goes
// on where it stopped. The hooks are heard as Run's are, except
// Calibrating (a pool builds nothing ahead); opt.Range is asked once,
// first.
func RunPool(ctx context.Context, p Pool, opt Options) (Result, error) {
	var res Result
	d, err := opt.Range()
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrRange, err)
	}
	k := p.Machines()
	if k < 1 {
		return res, errors.New("drive: a pool of no machines")
	}
	r := &pooled{p: p, d: d, opt: opt, res: &res, level: make([]float64, k), known: make([]bool, k), ends: make([][2][][]float64, k), busy: make([]*poolBoot, k), lost: make([]bool, k)}
	if err := r.replay(opt.History); err != nil || r.ended {
		return res, err
	}
	if r.s == nil && r.walk == nil {
		if err := r.calibrate(ctx); err != nil {
			return res, err
		}
	}
	if r.s == nil && r.walk != nil {
		if err := r.walkBack(ctx); err != nil {
			return res, err
		}
	}
	if r.s == nil {
		return res, nil
	}
	return res, r.search(ctx)
}

// replay takes in a resumed pool's boots as they ended: the endpoints'
// until calibration ends (the search made and Started heard, or the
// regression not reproduced: ended), then the search's and the
// endpoints' that ended after, each at its machine's level.
func (r *pooled) replay(hist []Record) error {
	for _, h := range hist {
		if h.Machine < 0 || h.Machine >= len(r.busy) {
			return fmt.Errorf("drive: a resumed boot on machine %d of a pool of %d", h.Machine, len(r.busy))
		}
		if h.Commit == BadEndpoint {
			h.Commit = r.d.Len() - 1
		}
		if r.s != nil && r.walk != nil && (h.Why == WalkingBack || (h.Why == Calibrating && h.Commit == culprit.GoodEndpoint)) {
			// A boot of the walk back, or of the good endpoint it left,
			// that ended after it found a good release.
			h.Kernel = r.relabel(h.Kernel, -1)
			if h.Commit == Older {
				continue
			}
		}
		switch {
		case r.ended:
			return nil
		case r.walk != nil && r.s == nil:
			if err := r.walkBoot(h.Machine, h.Kernel, h.Boot); err != nil {
				return err
			}
		case h.Why == WalkingBack:
			return errors.New("drive: a resumed boot of the walk back when no walk is under way")
		case h.Why == Calibrating && r.s == nil:
			if h.Skip || len(h.Samples) == 0 {
				continue
			}
			if _, err := r.endpointBoot(h.Machine, h.Commit, h.Samples); err != nil {
				return err
			}
		case h.Why == Calibrating:
			if err := r.lateEndpoint(h.Machine, h.Commit, h.Boot); err != nil {
				return err
			}
		case r.s == nil:
			return errors.New("drive: a resumed search boot before calibration ended")
		default:
			r.s.Replay(observation(Record{Kernel: h.Kernel, Boot: Boot{Samples: r.scaled(h.Machine, h.Samples), Skip: h.Skip}}))
		}
	}
	return nil
}

// pooled is one RunPool.
type pooled struct {
	p   Pool
	d   *culprit.DAG
	opt Options
	res *Result
	s   *culprit.Search
	// level is each machine's offset on the log scale against ref, known
	// once it has boots of both endpoints; ends are those boots, raw
	// (good, bad). ref is the machines' mean when calibration ends.
	level []float64
	known []bool
	ref   float64
	ends  [][2][][]float64
	// order are the endpoints' boots in the order they ended.
	order []endBoot
	// busy is what each machine is booting (nil: free); lost the
	// machines that are gone.
	busy []*poolBoot
	lost []bool
	// ended: calibration found no regression to search for (nor the
	// walk back, if any, a good release).
	ended bool
	// walk is the walk back under way or done (nil: none).
	walk *walking
}

// endBoot is an endpoint's boot on a machine.
type endBoot struct {
	machine, commit int
	samples         []float64
}

// poolBoot is a boot under way: its kernel, and the step that asked
// for it (nil in calibration).
type poolBoot struct {
	k    Kernel
	step *culprit.Step
}

// calibrate boots the endpoints on every machine, each its bad and good
// one in turn (odd machines good first), until culprit.Calibrate has
// enough of the pooled boots; then sets each machine's level and makes
// the search. Boots still under way then are taken in by the search.
func (r *pooled) calibrate(ctx context.Context) error {
	n := max(r.opt.CalibrationSamples, 1)
	fixed := func(v []float64) bool { return len(v) < n }
	side := func(i int) int { // 0 good, 1 bad: the side machine i has fewer of
		g, b := len(r.ends[i][0]), len(r.ends[i][1])
		if g == b {
			return 1 - i%2
		}
		if g < b {
			return 0
		}
		return 1
	}
	start := func(i int) {
		c := culprit.GoodEndpoint
		if side(i) == 1 {
			c = r.d.Len() - 1
		}
		r.busy[i] = &poolBoot{k: Kernel{Commit: c, Why: Calibrating}}
		r.p.Start(i, r.busy[i].k, fixed)
	}
	startFree := func() {
		for j := range r.busy {
			if r.busy[j] == nil && !r.lost[j] {
				start(j)
			}
		}
	}
	startFree()
	for {
		i, b, err := r.wait(ctx)
		if err != nil {
			return err
		}
		if i < 0 {
			// The machines under way were lost: the others go on.
			startFree()
			continue
		}
		commit := r.busy[i].k.Commit
		r.busy[i] = nil
		if b.Skip || len(b.Samples) == 0 {
			which := "bad"
			if commit == culprit.GoodEndpoint {
				which = "good"
			}
			return fmt.Errorf("calibration: the %s endpoint cannot be measured on machine %d: %s", which, i, b.Reason)
		}
		done, err := r.endpointBoot(i, commit, b.Samples)
		if err != nil || done {
			return err
		}
		startFree()
	}
}

// endpointBoot takes in an endpoint's calibration boot on machine i,
// and ends calibration when culprit.Calibrate has enough of the pooled
// boots: it sets each machine's level and makes the search (or ends the
// run as not reproduced). Boots still under way then are taken in by
// the search.
func (r *pooled) endpointBoot(i, commit int, samples []float64) (bool, error) {
	s := 0
	if commit != culprit.GoodEndpoint {
		s = 1
	}
	r.ends[i][s] = append(r.ends[i][s], samples)
	r.order = append(r.order, endBoot{i, commit, samples})
	r.setLevels()
	goods, bads := r.pooledEnds()
	model, more, err := culprit.Calibrate(goods, bads, r.opt.Least, culprit.FitOptions{})
	if more {
		return false, nil
	}
	h := r.opt.Hooks
	if h.Stop != nil {
		if why, goodIsBad := h.Stop(goods, bads); why != "" {
			r.res.NotReproduced, r.ended, r.res.GoodIsBad = why, true, goodIsBad
			if h.Calibrated != nil {
				h.Calibrated(goods, bads, culprit.Model{}, errors.New(why))
			}
			if goodIsBad && r.opt.Walk != nil {
				r.beginWalk(bads)
			}
			return true, nil
		}
	}
	r.res.Goods, r.res.Bads, r.res.Model = goods, bads, model
	r.fixLevels()
	if h.Calibrated != nil {
		h.Calibrated(goods, bads, model, err)
	}
	if err != nil {
		r.res.NotReproduced, r.ended, r.res.GoodIsBad = err.Error(), true, true
		if r.opt.Walk != nil {
			r.beginWalk(bads)
		}
		return true, nil
	}
	so := r.opt.Search
	if r.opt.StartCosts != nil {
		so.Costs = r.opt.StartCosts()
	}
	if r.s, err = culprit.New(r.d, model, so); err != nil {
		return true, err
	}
	r.res.Search = r.s
	for _, b := range r.order {
		if r.known[b.machine] {
			r.s.ObserveAt(b.commit, r.scaled(b.machine, b.samples))
		}
	}
	if h.Started != nil {
		h.Started(r.s)
	}
	return true, nil
}

// wait is the pool's next boot, with the context's error first. A lost
// machine's boot is dropped (the search asks for it again) and the next
// is waited for; with every machine lost, the last one's error ends the
// run.
func (r *pooled) wait(ctx context.Context) (int, Boot, error) {
	for {
		if err := ctx.Err(); err != nil {
			return 0, Boot{}, err
		}
		i, b, err := r.p.Wait(ctx)
		if err == nil || !errors.Is(err, ErrMachineLost) {
			return i, b, err
		}
		r.lost[i], r.busy[i] = true, nil
		r.res.Lost = append(r.res.Lost, LostMachine{Machine: i, Err: err})
		if len(r.res.Lost) == len(r.lost) {
			return i, b, err
		}
		if r.running() == 0 {
			return -1, Boot{}, nil // nothing under way: the caller starts the free machines
		}
	}
}

// running counts the boots under way.
func (r *pooled) running() int {
	k := 0
	for _, b := range r.busy {
		if b != nil {
			k++
		}
	}
	return k
}

// search keeps every machine booting what the search asks until it
// ends.
func (r *pooled) search(ctx context.Context) error {
	for {
		for i := range r.busy {
			if r.busy[i] != nil || r.lost[i] {
				continue
			}
			if !r.known[i] {
				// Its level first: a boot of the endpoint it lacks.
				c := culprit.GoodEndpoint
				if len(r.ends[i][1]) == 0 {
					c = r.d.Len() - 1
				}
				r.busy[i] = &poolBoot{k: Kernel{Commit: c, Why: Calibrating}}
				r.p.Start(i, r.busy[i].k, func(v []float64) bool { return len(v) < max(r.opt.CalibrationSamples, 1) })
				continue
			}
			if r.opt.Hooks.Costs != nil {
				r.s.SetCosts(r.opt.Hooks.Costs())
			}
			step, ok := r.choose()
			if !ok {
				// Boots still under way are left: the answer stands on
				// the boots taken in, as one machine's would.
				r.res.End = step
				return nil
			}
			kn := Kernel{Commit: step.Commit, Reverted: step.Reverted, Why: Searching}
			switch {
			case step.Confirming:
				kn.Why = Confirming
			case step.Commit == culprit.GoodEndpoint || kn.Bad(r.d.Len()):
				kn.Why = Following
			}
			if r.opt.Hooks.Before != nil {
				r.opt.Hooks.Before(r.s, step)
			}
			r.busy[i] = &poolBoot{k: kn, step: &step}
			// The boot runs while the search takes in others': it stops
			// by the search as it stands now, at the machine's level.
			more, f := r.s.Stopper(), math.Exp(-r.level[i])
			r.p.Start(i, kn, func(v []float64) bool {
				scaled := make([]float64, len(v))
				for j, x := range v {
					scaled[j] = x * f
				}
				return more(scaled)
			})
		}
		i, b, err := r.wait(ctx)
		if err != nil {
			return err
		}
		if i < 0 {
			continue
		}
		pb := r.busy[i]
		r.busy[i] = nil
		switch {
		case pb.step == nil && pb.k.Why == Searching:
			// A boot of the walk back that ended after it found a good
			// release: evidence at its commit.
			if pb.k.Commit != Older && r.known[i] && !b.Skip && len(b.Samples) > 0 {
				r.s.ObserveAt(pb.k.Commit, r.scaled(i, b.Samples))
			}
		case pb.step == nil: // an endpoint's boot that ended after calibration
			if err := r.lateEndpoint(i, pb.k.Commit, b); err != nil {
				return err
			}
		case b.Skip || len(b.Samples) == 0:
			r.s.Skip(*pb.step)
		default:
			r.s.Observe(*pb.step, r.scaled(i, b.Samples))
		}
	}
}

// lateEndpoint takes in an endpoint's boot on machine i that ended after
// calibration: evidence at the machine's level once that is known (all
// its endpoints' boots when this one makes it known).
func (r *pooled) lateEndpoint(i, commit int, b Boot) error {
	side, which := 1, "bad"
	if commit == culprit.GoodEndpoint {
		side, which = 0, "good"
	}
	if b.Skip || len(b.Samples) == 0 {
		return fmt.Errorf("the %s endpoint cannot be measured on machine %d: %s", which, i, b.Reason)
	}
	r.ends[i][side] = append(r.ends[i][side], b.Samples)
	if r.known[i] {
		r.s.ObserveAt(commit, r.scaled(i, b.Samples))
		return nil
	}
	if r.learnLevel(i); r.known[i] {
		for s, c := range []int{culprit.GoodEndpoint, r.d.Len() - 1} {
			for _, xs := range r.ends[i][s] {
				r.s.ObserveAt(c, r.scaled(i, xs))
			}
		}
	}
	return nil
}

// choose is the next boot for a free machine, false when the search
// says it is done (its last step). While other machines boot, a step of
// the search proper (not an endpoint, a revert or a confirmation) is
// traded for the commit that tells the most per second beside theirs
// (culprit's Beside).
func (r *pooled) choose() (culprit.Step, bool) {
	step := r.s.Next()
	if step.Kind != culprit.Measure {
		return step, false
	}
	var pending []culprit.Step
	bs, says := r.p.(Builds)
	for i, b := range r.busy {
		if b != nil && b.step != nil {
			pending = append(pending, *b.step)
			if says && !b.step.Reverted && bs.KernelBuilt(i) {
				r.s.Built(b.step.Commit)
			}
		}
	}
	endpoint := step.Commit == culprit.GoodEndpoint || step.Commit == r.d.Len()-1
	if endpoint && !step.Confirming && !step.Reverted && slices.ContainsFunc(pending, func(p culprit.Step) bool { return p.Commit == step.Commit && !p.Reverted }) {
		// The endpoint the search follows the machine by is booting on
		// another machine: its boot will say what this one would.
		if b, ok := r.s.Beside(pending); ok {
			return b, true
		}
		return step, true
	}
	if len(pending) == 0 || step.Confirming || step.Reverted || endpoint {
		return step, true
	}
	if b, ok := r.s.Beside(pending); ok {
		return b, true
	}
	return step, true
}
