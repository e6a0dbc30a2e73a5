package lab

import (
	"context"
	"slices"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/verdict"
)

// Pool tests commits on several identical lab machines at once. When the
// bisection asks for commit M, M goes to a free machine and the others
// take the commits that come next after either verdict on M (found on a
// fork of the session): when M's verdict is in, the next step's kernel
// is already measured or being measured. The session still marks every
// verdict in git's order, each from that commit's own samples, so the
// answer is the one a single machine would give — k-way sections for the
// price of machines, not of trust.
type Pool struct {
	// Pipes are one pipeline per machine, sharing the state directory,
	// each building in its own slot.
	Pipes []*Pipeline
	// Session is the bisection; Graph a second graph of its repository
	// for the forks, which must not change what the session parsed.
	Session *bisect.Session
	Graph   *bisect.Graph

	mu      sync.Mutex
	free    []bool
	freed   *sync.Cond
	flights map[string]*flight
	wg      sync.WaitGroup
}

// flight is a commit under test on one machine.
type flight struct {
	host      int
	cancel    context.CancelFunc
	cancelled bool // made way: its answer, if any, is not waited for
	done      chan struct{}
	ev        *Evidence
	err       error
}

func (p *Pool) setup() {
	if p.flights == nil {
		p.flights = map[string]*flight{}
		p.free = make([]bool, len(p.Pipes))
		for i := range p.free {
			p.free[i] = true
		}
		p.freed = sync.NewCond(&p.mu)
	}
}

// Calibrate measures both endpoints at once, on the first two machines.
func (p *Pool) Calibrate(ctx context.Context, good, bad string) (*Calibration, error) {
	p.drain()
	return calibrate(ctx, p.Pipes, good, bad)
}

// FindGood walks back from a good endpoint that measured bad, on the
// first machine (one release at a time: each decides the next).
func (p *Pool) FindGood(ctx context.Context, cal *Calibration, walk Walk) (*Calibration, error) {
	p.drain()
	return findGood(ctx, p.Pipes, cal, walk)
}

// Confirm measures the first bad commit against its parent and the bad
// endpoint with it reverted, on two machines at once, once
// the machines are no longer busy with commits the bisection did not
// need in the end.
func (p *Pool) Confirm(ctx context.Context, culprit string, parents []string, bad string) (*Confirmation, error) {
	p.drain()
	return confirm(ctx, p.Pipes, culprit, parents, bad)
}

// drain stops every test in flight and waits until all machines are free:
// a machine measures one kernel at a time.
func (p *Pool) drain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setup()
	for _, f := range p.flights {
		f.cancelled = true
		f.cancel()
	}
	for slices.Contains(p.free, false) {
		p.freed.Wait()
	}
}

// Test implements bisect.TestFunc: the commit's verdict, from a test
// started earlier as a prediction or started now, with the next commits
// started on the machines left.
func (p *Pool) Test(ctx context.Context, commit plumbing.Hash) (bisect.Outcome, error) {
	c := commit.String()
	next := p.predict(commit)
	p.mu.Lock()
	p.setup()
	// What is in flight and will not be needed makes way.
	for other, f := range p.flights {
		if other != c && !slices.Contains(next, other) {
			f.cancelled = true
			f.cancel()
		}
	}
	f := p.flights[c]
	if f == nil || f.cancelled {
		f = p.startLocked(ctx, c)
	}
	for _, n := range next {
		if (p.flights[n] == nil || p.flights[n].cancelled) && p.freeHostLocked() >= 0 {
			p.startLocked(ctx, n)
		}
	}
	p.mu.Unlock()

	select {
	case <-f.done:
	case <-ctx.Done():
		return bisect.Outcome{}, ctx.Err()
	}
	p.mu.Lock()
	if p.flights[c] == f {
		delete(p.flights, c)
	}
	p.mu.Unlock()
	if f.err != nil {
		return bisect.Outcome{}, f.err
	}
	return outcome(f.ev), nil
}

// predict names the commits that come after commit, bad first.
func (p *Pool) predict(commit plumbing.Hash) []string {
	if len(p.Pipes) < 2 || p.Session == nil || p.Graph == nil {
		return nil
	}
	var out []string
	for _, v := range []verdict.Verdict{verdict.Bad, verdict.Good} {
		f := p.Session.Fork(p.Graph)
		if f.Mark(commit, v) != nil {
			continue
		}
		if n, err := f.Next(); err == nil && n.Kind == bisect.StepTest {
			out = append(out, n.Commit.String())
		}
	}
	return out
}

func (p *Pool) freeHostLocked() int {
	for i, ok := range p.free {
		if ok {
			return i
		}
	}
	return -1
}

// startLocked starts commit on a free machine, waiting for one if need
// be; p.mu is held.
func (p *Pool) startLocked(ctx context.Context, commit string) *flight {
	host := p.freeHostLocked()
	for host < 0 {
		p.freed.Wait()
		host = p.freeHostLocked()
	}
	fctx, cancel := context.WithCancel(ctx)
	f := &flight{host: host, cancel: cancel, done: make(chan struct{})}
	p.free[host] = false
	p.flights[commit] = f
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f.ev, f.err = p.Pipes[host].Evidence(fctx, commit)
		cancel()
		p.mu.Lock()
		p.free[host] = true
		if f.cancelled && p.flights[commit] == f {
			delete(p.flights, commit) // made way: not an answer
		}
		p.freed.Broadcast()
		p.mu.Unlock()
		close(f.done)
	}()
	return f
}

// Close stops what is still in flight and waits for it.
func (p *Pool) Close() {
	p.mu.Lock()
	for _, f := range p.flights {
		f.cancel()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
