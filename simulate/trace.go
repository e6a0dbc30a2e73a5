package simulate

import (
	"context"
	"errors"
	"math/rand/v2"

	"kbisect/culprit"
	"kbisect/drive"
)

// Range is a range given commit by commit, for a bisection traced on it:
// each commit's parents within it (parents first, the bad endpoint last),
// the first bad commit, the commits whose kernel does not build, and
// whether a commit's revert applies on the bad endpoint (nil: every one).
type Range struct {
	Parents       [][]int
	Culprit       int
	Broken        map[int]bool
	RevertApplies func(int) bool
}

// TraceOptions make the lab of a traced bisection the simulated host's.
type TraceOptions struct {
	// Host draws each boot's noise as internal/simhost seeded with it
	// does under an exact noise model: one generator per boot, numbered
	// in order, levels in µs; samples whole µs, as the tracer prints
	// them (in ns). 0: simulate's own streams, from Config.Seed.
	Host uint64
	// Slots are the builds ahead a run makes while it measures (0:
	// none).
	Slots int
	// Costs are the lab's costs the search is told after a number of
	// boots (skips included), as a run learns them from its journal
	// (nil: Config.Costs throughout).
	Costs func(boots int) culprit.Costs
}

// TracedBoot is one boot a traced bisection asked for: the kernel (a
// commit of the range, culprit.GoodEndpoint the good endpoint, the bad
// endpoint with Commit reverted), what for, and its samples — or none,
// when the kernel could not be measured.
type TracedBoot struct {
	Commit   int
	Reverted bool
	Why      drive.Why
	Samples  []float64
	Skipped  bool
}

// Traced is one bisection, boot by boot, and its end.
type Traced struct {
	Boots []TracedBoot
	// End is the search's last step (nil when calibration found no
	// regression: NotReproduced says why).
	End           *culprit.Step
	NotReproduced string
}

// Trace runs kbisect's engine once on r as cfg sets it (the loop of
// package drive, as a simulation and run --job run it) and returns every
// boot it took. It is how a test holds simulate against run --job on the
// same tree and noise: with the host's seed, the same costs and build
// slots, both must ask for the same kernels in the same order.
func Trace(ctx context.Context, cfg Config, r Range, o TraceOptions) (*Traced, error) {
	cfg.Commits = len(r.Parents)
	if cfg.Runs == 0 {
		cfg.Runs = 1
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Exec {
		return nil, errors.New("simulate: a traced bisection is of boots, not of --exec runs")
	}
	d, err := culprit.NewDAG(r.Parents)
	if err != nil {
		return nil, err
	}
	if r.Culprit < 0 || r.Culprit >= d.Len() {
		return nil, errors.New("simulate: the culprit is not a commit of the range")
	}
	l := newLab(&cfg, r.Culprit, rand.New(rand.NewPCG(cfg.Seed^0x9e3779b97f4a7c15, 0)))
	l.hist = &history{dag: d, culprit: r.Culprit, broken: r.Broken, reverts: r.RevertApplies}
	l.host = o.Host
	cfg.predict = o.Slots
	opt := engineOptions(&cfg, l)
	t := &Traced{}
	if o.Costs != nil {
		at := func() culprit.Costs { return o.Costs(len(t.Boots)) }
		opt.StartCosts, opt.Hooks.Costs = at, at
	}
	res, err := drive.Run(ctx, &tracing{l: l, t: t}, opt)
	if err != nil {
		return t, err
	}
	t.NotReproduced = res.NotReproduced
	if res.Search != nil {
		t.End = &res.End
	}
	return t, nil
}

// tracing is the lab, each boot kept as it is taken.
type tracing struct {
	l *lab
	t *Traced
}

func (m *tracing) Boot(ctx context.Context, k drive.Kernel, more func([]float64) bool) (drive.Boot, error) {
	b, err := m.l.Boot(ctx, k, more)
	if err == nil {
		c := k.Commit
		if c == drive.BadEndpoint {
			c = m.l.n - 1
		}
		m.t.Boots = append(m.t.Boots, TracedBoot{Commit: c, Reverted: k.Reverted, Why: k.Why, Samples: b.Samples, Skipped: b.Skip})
	}
	return b, err
}
