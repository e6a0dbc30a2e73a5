package simulate

import (
	"context"
	"math"
	"math/rand/v2"

	"kbisect/drive"
	"kbisect/internal/simnoise"
)

// lab is one simulated bisection's machine: a linear range of n commits
// (0 … n−1, the bad endpoint last; the good endpoint, −1, before them)
// whose commits from culprit on are bad, and the clock and counters of
// what the strategy spent.
type lab struct {
	n, culprit int
	// hist is the range when it is not a line of commits that all
	// build and revert.
	hist      *history
	good, bad float64
	noise     *simnoise.Run
	rng       *rand.Rand
	costs     Costs
	built     map[int]bool
	reverts   map[int]bool
	spent     spent
	// trace is every boot in order, for pricing a run on a timeline
	// (the speed benchmark): what spent sums up, one boot at a time.
	trace []bootRecord
	// ahead are the kernels the run builds while its next boot is
	// measured (Config.predict).
	ahead []kernel
	// later, when set, is a second step: from the culprit on a kernel is
	// at middle, from later on at bad (Config.FirstStep).
	later  int
	middle float64
	// host, when set, draws each boot's noise as a simulated host seeded
	// with it does (Trace); hostBoots counts the boots it drew.
	host, hostBoots uint64
	// machines draws a pool's machines' levels (Config.Machines).
	machines *rand.Rand
	// factor, when set, is the level of the machine that boots (a pool's):
	// every kernel's level times it.
	factor float64
}

// Boot is the lab as the loop of package drive sees it: one commit on
// one machine. It boots the kernel (building it first when it is new),
// takes samples while more says so, and records the boot in the trace
// with what it was for and what was built meanwhile.
func (l *lab) Boot(_ context.Context, k drive.Kernel, more func([]float64) bool) (drive.Boot, error) {
	c := k.Commit
	if c == drive.BadEndpoint {
		c = l.n - 1
	}
	if why := l.unmeasurable(c, k.Reverted); why != "" {
		return drive.Boot{Skip: true, Reason: why}, nil
	}
	m := l.boot(c, k.Reverted)
	rec := &l.trace[len(l.trace)-1]
	rec.ahead, l.ahead = l.ahead, nil
	switch k.Why {
	case drive.Calibrating:
		rec.phase = phaseCalibration
	case drive.Confirming:
		rec.phase = phaseConfirm
	}
	var xs []float64
	for len(xs) == 0 || more(xs) {
		xs = append(xs, m.sample())
	}
	return drive.Boot{Samples: xs}, nil
}

// bootRecord is one boot of a run: the kernel, whether it had to be
// built first, and how many samples it gave.
type bootRecord struct {
	commit          int
	reverted, built bool
	samples         int
	phase           phase
	// ahead are the kernels a run builds, in order, while this boot is
	// measured (Config.predict).
	ahead []kernel
}

// kernel is a kernel of a trace: a commit (−1 the good endpoint), or the
// bad endpoint with it reverted.
type kernel struct {
	commit   int
	reverted bool
}

// phase is what a boot was for.
type phase uint8

const (
	phaseSearch      phase = iota // a step of the search
	phaseCalibration              // an endpoint's, before the search
	phaseConfirm                  // the answer's confirmation
)

// mark says what the last boot was for.
func (l *lab) mark(p phase) { l.trace[len(l.trace)-1].phase = p }

// spent is what a strategy used in one bisection.
type spent struct {
	builds, boots, samples int
	seconds                float64
	// wall, when set, is the wall time of several machines' seconds.
	wall float64
}

func newLab(cfg *Config, culprit int, rng *rand.Rand) *lab {
	return &lab{n: cfg.Commits, culprit: culprit, good: cfg.Good, bad: cfg.Bad, noise: cfg.Noise.NewRun(), rng: rng, costs: cfg.Costs,
		built: map[int]bool{}, reverts: map[int]bool{}}
}

// isBad says whether commit c is bad; the good endpoint is −1.
func (l *lab) isBad(c int) bool {
	if l.hist != nil {
		return l.hist.bad(c)
	}
	return c >= l.culprit
}

// unmeasurable says why the kernel cannot be measured ("" when it can):
// a commit that does not build (its build is spent), a revert that does
// not apply on the bad endpoint.
func (l *lab) unmeasurable(c int, reverted bool) string {
	switch {
	case l.hist == nil:
		return ""
	case reverted && l.hist.reverts != nil && !l.hist.reverts(c):
		return "the revert does not apply on the bad endpoint"
	case !reverted && l.hist.broken[c]:
		l.build(c)
		return "the kernel does not build"
	}
	return ""
}

// build builds a commit's kernel, once.
func (l *lab) build(c int) bool {
	if l.built[c] {
		return false
	}
	l.built[c] = true
	l.spent.builds++
	l.spent.seconds += l.costs.Build
	return true
}

// boot builds (when needed) and boots commit c, or the bad endpoint with
// c reverted: that kernel is good only when c is the culprit.
func (l *lab) boot(c int, reverted bool) *machine {
	bad, built := l.isBad(c), false
	if reverted {
		if !l.reverts[c] {
			l.reverts[c], built = true, true
			l.spent.builds++
			l.spent.seconds += l.costs.Build
		}
		bad = c != l.culprit
	} else {
		built = l.build(c)
	}
	l.trace = append(l.trace, bootRecord{commit: c, reverted: reverted, built: built})
	l.spent.boots++
	l.spent.seconds += l.costs.Boot
	level, other := l.good, l.bad
	if bad {
		level, other = other, level
	}
	if l.later > 0 {
		// Two steps, each effect a factor of its own: the culprit takes
		// a kernel to middle, the later step on to the bad level.
		has := func(s int) bool {
			if reverted {
				return c != s
			}
			return c >= s
		}
		switch first, second := has(l.culprit), has(l.later); {
		case first && !second:
			level, other, bad = l.middle, l.good, true
		case !first && second:
			level, other, bad = l.good*l.bad/l.middle, l.good, true
		}
	}
	if l.factor > 0 {
		level, other = level*l.factor, other*l.factor
	}
	rng := l.rng
	if l.host != 0 {
		// As internal/simhost draws a boot: its own generator, numbered
		// by the boots measured so far, at levels in µs.
		l.hostBoots++
		rng = rand.New(rand.NewPCG(l.host, 1<<63+l.hostBoots))
		level, other = level/1000, other/1000
	}
	return &machine{l: l, b: l.noise.Boot(rng, level, other, bad), at: len(l.trace) - 1}
}

// machine is a booted kernel.
type machine struct {
	l  *lab
	b  *simnoise.Boot
	at int // its boot in l.trace
}

func (m *machine) sample() float64 {
	m.l.trace[m.at].samples++
	m.l.spent.samples++
	m.l.spent.seconds += m.l.costs.Sample
	if m.l.host != 0 {
		// Whole µs, as the tracer prints them, in ns.
		return math.Round(m.b.Sample()) * 1000
	}
	return m.b.Sample()
}

func (m *machine) samples(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = m.sample()
	}
	return out
}
