// Package drive runs the posterior search on a machine: calibration of
// the endpoints, the search and its confirmation, boot by boot — one
// loop, whether the machine is a lab host (package run) or a simulated
// one (package simulate), so that what a simulation says is what a run
// does. A machine is one commit on one machine: it boots a kernel and
// measures it, or says the kernel cannot be measured. Everything the
// two callers do differently (journaling, progress, building ahead,
// pricing) hangs on hooks.
//
// It imports culprit and nothing else of kbisect.
package drive

import (
	"context"
	"errors"
	"fmt"

	"kbisect/culprit"
)

// Why says what a boot is for.
type Why uint8

// What boots are for.
const (
	// Calibrating: a boot of an endpoint, before the search.
	Calibrating Why = iota
	// Searching: a boot the search chose.
	Searching
	// Following: a boot of an endpoint the search asked for, to follow
	// the machine's drift and how often the regression shows.
	Following
	// Confirming: a fresh boot of the leading candidate's confirmation.
	Confirming
	// WalkingBack: a boot of an older release, on the walk back from a
	// good endpoint that measured bad (Options.Walk).
	WalkingBack
)

// Kernel is what one boot boots: a commit of the range (its index), the
// good endpoint (culprit.GoodEndpoint), the bad endpoint with a commit
// reverted, or an older release of the walk back (Older, and Release
// its index among Walk's releases).
type Kernel struct {
	Commit   int
	Reverted bool
	Why      Why
	Release  int
}

// Bad says whether the kernel is the bad endpoint of a range of n
// commits (not reverted).
func (k Kernel) Bad(n int) bool { return k.Commit == n-1 && !k.Reverted }

// Boot is what a machine made of one boot: its samples (badness values,
// larger is worse), or Skip when the kernel cannot be measured (it does
// not build or boot, the revert does not apply) — the commit's own
// failure, never the lab's (that is an error).
type Boot struct {
	Samples []float64
	Skip    bool
	// Reason says why a skip was one.
	Reason string
}

// Machine is one commit on one machine.
type Machine interface {
	// Boot builds the kernel (unless it is), boots it and measures it,
	// taking samples while more says so. An error is the lab's: the run
	// stops, and resumes from what was recorded.
	Boot(ctx context.Context, k Kernel, more func(samples []float64) bool) (Boot, error)
}

// Record is a boot a resumed run took before it stopped, in order; in a
// pool (RunPool), in the order the boots ended, each with its Machine.
type Record struct {
	Kernel
	Boot
	Machine int
}

// Options set a run of the loop.
type Options struct {
	// Range gives the range to search, when the loop needs it (after
	// calibration, or at its first round to build ahead): its DAG, or an
	// error that ends the run. errNotReproduced-like errors are the
	// caller's to type.
	Range func() (*culprit.DAG, error)
	// Search are the search's options; StartCosts, when set, gives its
	// costs as calibration's boots measured them, when the search is
	// made.
	Search     culprit.Options
	StartCosts func() culprit.Costs
	// Least is the fewest samples the job asks of a search boot (for
	// Calibrate's separation); CalibrationSamples the samples of a
	// calibration boot.
	Least, CalibrationSamples int
	// History is what a resumed run measured, in order.
	History []Record
	Hooks   Hooks
	// Walk, when set, walks back along older releases when calibration
	// finds the good endpoint bad (nil: the run ends not reproduced).
	Walk *Walk
}

// Hooks are what the callers do beside the loop; any may be nil.
type Hooks struct {
	// Calibrating hears each round of calibration as it begins (round 0
	// first): the first round may build the good endpoint while the bad
	// one is measured. provisional makes, from the second round on, a
	// search on the model the boots so far give (nil before, or when the
	// range cannot be had yet): its first step is what to build ahead.
	Calibrating func(round int, provisional func() *culprit.Search)
	// Stop ends calibration, when it has all its boots, as not
	// reproduced with a reason (the job's absolute threshold says so,
	// culprit.AgainstThreshold), "" to take calibration's model;
	// goodIsBad says the reason is the good endpoint's (a walk back may
	// find an older good one).
	Stop func(goods, bads [][]float64) (why string, goodIsBad bool)
	// Calibrated hears calibration's end: its model, or the error that
	// says the regression is not reproduced.
	Calibrated func(goods, bads [][]float64, m culprit.Model, err error)
	// Started hears the search made, before any boot of it.
	Started func(s *culprit.Search)
	// Before hears each search boot before it is measured (build what
	// may come next meanwhile).
	Before func(s *culprit.Search, step culprit.Step)
	// Costs are the lab's costs as measured now (nil: the options').
	Costs func() culprit.Costs
}

// Result is how the loop ended.
type Result struct {
	// Goods and Bads are the endpoints' calibration boots.
	Goods, Bads [][]float64
	// Model is calibration's model; NotReproduced, when set, says why
	// calibration found no regression to search for (Search is nil).
	Model         culprit.Model
	NotReproduced string
	Search        *culprit.Search
	// End is the search's last step: found, inconclusive or not
	// reproduced.
	End culprit.Step
	// Lost are the machines of a pool lost during the run (RunPool).
	Lost []LostMachine
	// GoodIsBad: calibration found the good endpoint bad, or the
	// endpoints alike (Options.Walk walks back when set).
	GoodIsBad bool
}

// LostMachine is a pool's machine that stopped answering, and its error.
type LostMachine struct {
	Machine int
	Err     error
}

// ErrRange wraps an error of Options.Range.
var ErrRange = errors.New("the range")

// Run calibrates on the endpoints, searches the range and confirms the
// answer, on machine m.
func Run(ctx context.Context, m Machine, opt Options) (Result, error) {
	var res Result
	hist := opt.History
	var order []Record // calibration's boots, in order
	for len(hist) > 0 && hist[0].Why == Calibrating {
		if !hist[0].Skip {
			order = append(order, hist[0])
			if hist[0].Commit == culprit.GoodEndpoint {
				res.Goods = append(res.Goods, hist[0].Samples)
			} else {
				res.Bads = append(res.Bads, hist[0].Samples)
			}
		}
		hist = hist[1:]
	}
	model, calibrated, err := calibrate(ctx, m, opt, &res, &order)
	if err == nil && !calibrated && res.GoodIsBad && opt.Walk != nil {
		model, calibrated, err = walkBack(ctx, m, opt, &res, &order, &hist)
	}
	if err != nil || !calibrated {
		return res, err
	}
	d, err := opt.Range()
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrRange, err)
	}
	s, err := newSearch(d, model, opt, order)
	if err != nil {
		return res, err
	}
	res.Search = s
	if opt.Hooks.Started != nil {
		opt.Hooks.Started(s)
	}
	for _, r := range hist {
		s.Replay(observation(r))
	}
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if opt.Hooks.Costs != nil {
			s.SetCosts(opt.Hooks.Costs())
		}
		step := s.Next()
		if step.Kind != culprit.Measure {
			res.End = step
			return res, nil
		}
		if opt.Hooks.Before != nil {
			opt.Hooks.Before(s, step)
		}
		k := Kernel{Commit: step.Commit, Reverted: step.Reverted, Why: Searching}
		switch {
		case step.Confirming:
			k.Why = Confirming
		case step.Commit == culprit.GoodEndpoint || k.Bad(d.Len()):
			k.Why = Following
		}
		b, err := m.Boot(ctx, k, s.More)
		if err != nil {
			return res, err
		}
		if b.Skip || len(b.Samples) == 0 {
			s.Skip(step)
			continue
		}
		s.Observe(step, b.Samples)
	}
}

// observation is a resumed run's boot as the search replays it.
func observation(r Record) culprit.Observation {
	return culprit.Observation{Commit: r.Commit, Reverted: r.Reverted, Confirming: r.Why == Confirming,
		Skipped: r.Skip || len(r.Samples) == 0, Samples: r.Samples}
}

// calibrate boots each endpoint, bad first, until culprit.Calibrate has
// enough; false (with res.NotReproduced set) when the regression is not
// reproduced.
func calibrate(ctx context.Context, m Machine, opt Options, res *Result, order *[]Record) (culprit.Model, bool, error) {
	n := max(opt.CalibrationSamples, 1)
	fixed := func(v []float64) bool { return len(v) < n }
	for round := 0; ; round++ {
		model, more, err := culprit.Calibrate(res.Goods, res.Bads, opt.Least, culprit.FitOptions{})
		if !more && opt.Hooks.Stop != nil {
			// Asked when calibration has all its boots, not before: an
			// intermittent regression may not show on the bad endpoint's
			// first three.
			if why, goodIsBad := opt.Hooks.Stop(res.Goods, res.Bads); why != "" {
				res.NotReproduced, res.GoodIsBad = why, goodIsBad
				if opt.Hooks.Calibrated != nil {
					opt.Hooks.Calibrated(res.Goods, res.Bads, culprit.Model{}, errors.New(why))
				}
				return culprit.Model{}, false, nil
			}
		}
		if !more {
			res.Model = model
			if opt.Hooks.Calibrated != nil {
				opt.Hooks.Calibrated(res.Goods, res.Bads, model, err)
			}
			if err != nil {
				res.NotReproduced, res.GoodIsBad = err.Error(), true
				return model, false, nil
			}
			return model, true, nil
		}
		if opt.Hooks.Calibrating != nil {
			provisional := func() *culprit.Search {
				if min(len(res.Goods), len(res.Bads)) == 0 {
					return nil
				}
				d, err := opt.Range()
				if err != nil {
					return nil
				}
				s, _ := newSearch(d, model, opt, *order)
				return s
			}
			opt.Hooks.Calibrating(round, provisional)
		}
		for _, side := range []struct {
			commit int
			into   *[][]float64
		}{{BadEndpoint, &res.Bads}, {culprit.GoodEndpoint, &res.Goods}} {
			if len(*side.into) > min(len(res.Goods), len(res.Bads)) {
				continue // the other side's boot was cut short
			}
			if err := ctx.Err(); err != nil {
				return model, false, err
			}
			k := Kernel{Commit: side.commit, Why: Calibrating}
			b, err := m.Boot(ctx, k, fixed)
			if err != nil {
				return model, false, err
			}
			if b.Skip || len(b.Samples) == 0 {
				which := "bad"
				if side.commit == culprit.GoodEndpoint {
					which = "good"
				}
				return model, false, fmt.Errorf("calibration: the %s endpoint cannot be measured: %s", which, b.Reason)
			}
			*side.into = append(*side.into, b.Samples)
			*order = append(*order, Record{Kernel: k, Boot: b})
		}
	}
}

// BadEndpoint is the Commit a calibration boot of the bad endpoint
// carries before the range is known: the range's last commit.
const BadEndpoint = -2

// newSearch is the search of the range on the model, the endpoints'
// calibration boots its first evidence, in the order measured.
func newSearch(d *culprit.DAG, model culprit.Model, opt Options, order []Record) (*culprit.Search, error) {
	so := opt.Search
	if opt.StartCosts != nil {
		so.Costs = opt.StartCosts()
	}
	s, err := culprit.New(d, model, so)
	if err != nil {
		return nil, err
	}
	for _, r := range order {
		c := r.Commit
		if c == BadEndpoint {
			c = d.Len() - 1
		}
		s.ObserveAt(c, r.Samples)
	}
	return s, nil
}
