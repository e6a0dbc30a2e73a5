package simulate

import (
	"context"
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
	good, bad  float64
	noise      *simnoise.Run
	rng        *rand.Rand
	costs      Costs
	built      map[int]bool
	reverts    map[int]bool
	spent      spent
	// trace is every boot in order, for pricing a run on a timeline
	// (the speed benchmark): what spent sums up, one boot at a time.
	trace []bootRecord
	// ahead are the kernels the run builds while its next boot is
	// measured (Config.predict).
	ahead []kernel
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
}

func newLab(cfg *Config, culprit int, rng *rand.Rand) *lab {
	return &lab{n: cfg.Commits, culprit: culprit, good: cfg.Good, bad: cfg.Bad, noise: cfg.Noise.NewRun(), rng: rng, costs: cfg.Costs,
		built: map[int]bool{}, reverts: map[int]bool{}}
}

// isBad says whether commit c is bad; the good endpoint is −1.
func (l *lab) isBad(c int) bool { return c >= l.culprit }

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
	return &machine{l: l, b: l.noise.Boot(l.rng, level, other, bad), at: len(l.trace) - 1}
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
	return m.b.Sample()
}

func (m *machine) samples(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = m.sample()
	}
	return out
}
