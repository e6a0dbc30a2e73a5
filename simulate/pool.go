package simulate

import (
	"context"
	"math"
	"math/rand/v2"

	"kbisect/drive"
)

// pool is a simulated lab of several machines (Config.Machines) sharing
// one range, its truth and its build cache: each machine at its own
// level (a factor on every kernel's) and on its own clock. A boot is
// drawn when it starts and ends when its machine's clock has spent its
// costs; Wait hands the boots back in the order they end, so the search
// sees them as a real lab would.
type pool struct {
	l      *lab
	factor []float64
	clock  []float64 // when each machine's boot under way ends (or it became free)
	busy   []bool
	boots  []drive.Boot
	// ready is when each kernel a machine built is in the cache: another
	// machine that boots it sooner waits for the build.
	ready map[kernel]float64
	// under is each machine's kernel under way.
	under []kernel
	// now is when the last boot handed back ended.
	now float64
}

// newPool is k machines on lab l, their levels drawn log-normal with
// spread around 1 (all 1 with no spread).
func newPool(l *lab, k int, spread float64, rng *rand.Rand) *pool {
	p := &pool{l: l, factor: make([]float64, k), clock: make([]float64, k), busy: make([]bool, k), boots: make([]drive.Boot, k), ready: map[kernel]float64{}, under: make([]kernel, k)}
	for i := range p.factor {
		p.factor[i] = 1
		if spread > 0 {
			p.factor[i] = math.Exp(spread * rng.NormFloat64())
		}
	}
	return p
}

func (p *pool) Machines() int { return len(p.factor) }

// KernelBuilt says whether machine i's kernel under way is built by now
// (when the last boot handed back ended).
func (p *pool) KernelBuilt(i int) bool {
	at, ok := p.ready[p.under[i]]
	return !ok || at <= p.now
}

// Start draws machine i's boot of k now, and moves its clock to when
// the boot ends: what the lab spent on it (its build, when the kernel
// is new to the cache, the boot and its samples). A kernel another
// machine is still building is waited for: the boot begins when that
// build ends.
func (p *pool) Start(i int, k drive.Kernel, more func([]float64) bool) {
	c := k.Commit
	if c == drive.BadEndpoint {
		c = p.l.n - 1
	}
	key := kernel{c, k.Reverted}
	p.under[i] = key
	if at, ok := p.ready[key]; ok && at > p.clock[i] {
		p.clock[i] = at
	}
	before, boots := p.l.spent.seconds, len(p.l.trace)
	p.l.factor = p.factor[i]
	b, _ := p.l.Boot(context.Background(), k, more)
	p.l.factor = 0
	if len(p.l.trace) > boots && p.l.trace[boots].built {
		p.ready[key] = p.clock[i] + p.l.costs.Build
	}
	p.clock[i] += p.l.spent.seconds - before
	p.busy[i], p.boots[i] = true, b
}

// Wait is the boot under way that ends first.
func (p *pool) Wait(context.Context) (int, drive.Boot, error) {
	first := -1
	for i, b := range p.busy {
		if b && (first < 0 || p.clock[i] < p.clock[first]) {
			first = i
		}
	}
	p.busy[first], p.now = false, p.clock[first]
	// A free machine waits for the others: its clock moves on with the
	// lab's time, to when this boot ended.
	for i, b := range p.busy {
		if !b && p.clock[i] < p.clock[first] {
			p.clock[i] = p.clock[first]
		}
	}
	return first, p.boots[first], nil
}

// wall is the run's wall time: when the last boot it took in ended
// (boots under way when the search ended are stopped then).
func (p *pool) wall() float64 { return p.now }
