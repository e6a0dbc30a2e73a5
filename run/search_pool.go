package run

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"kbisect/culprit"
	"kbisect/drive"
	"kbisect/lab"
)

// machinePool is the posterior search's lab of several machines
// (drive.Pool): one pipeline per job, each building in its own slot of
// the shared cache and booting its own host. A boot runs in its own
// goroutine; everything that reads or writes the search, the journal
// or the run's maps happens in the caller's, in Start and Wait: a boot's
// samples are journaled when Wait hands it back, before the search
// takes it in.
type machinePool struct {
	p     *posteriorRun
	pipes []*lab.Pipeline
	// down are the machines lost before the run began (their preflight
	// failed): each is lost at its first boot.
	down []error
	ctx  context.Context
	stop context.CancelFunc
	ends chan machineEnd
	wg   sync.WaitGroup
	// seq numbers the boots begun, for their files' names; why says
	// why each machine was lost ("" for one that was not).
	seq int
	why []string
	// built says, per machine, that the kernel of its boot under way is
	// in the cache (drive.Builds).
	built []atomic.Bool
}

// machineEnd is a boot that ended on machine i, or its error.
type machineEnd struct {
	i      int
	k      drive.Kernel
	step   culprit.Step
	commit string
	built  string
	sub    string
	began  time.Time
	ev     *lab.Evidence
	revert *revertJob
	// reverted: the revert was made (or failed) before the boot ended.
	reverted bool
	err      error
}

func newMachinePool(ctx context.Context, p *posteriorRun, pipes []*lab.Pipeline, down []error) *machinePool {
	m := &machinePool{p: p, pipes: pipes, down: down, ends: make(chan machineEnd, len(pipes)), seq: len(p.journal.Records()), why: make([]string, len(pipes)),
		built: make([]atomic.Bool, len(pipes))}
	for i, pipe := range pipes {
		pipe.Built = func(string) { m.built[i].Store(true) }
	}
	for i, err := range down {
		if err != nil {
			m.why[i] = "left out at the preflight: " + err.Error()
		}
	}
	m.ctx, m.stop = context.WithCancel(ctx)
	return m
}

// close stops the boots still under way (the search ended without
// them) and waits for them.
func (m *machinePool) close() {
	m.stop()
	m.wg.Wait()
}

func (m *machinePool) Machines() int { return len(m.pipes) }

// KernelBuilt says whether machine i's kernel under way is in the cache.
func (m *machinePool) KernelBuilt(i int) bool { return m.built[i].Load() }

// Start begins machine i's boot of k.
func (m *machinePool) Start(i int, k drive.Kernel, more func([]float64) bool) {
	p, pipe := m.p, m.pipes[i]
	m.built[i].Store(false)
	m.seq++
	e := machineEnd{i: i, k: k, began: time.Now()}
	switch {
	case m.down[i] != nil:
		// Left out at the preflight: lost at once (Wait says so).
	case k.Why == drive.Calibrating:
		_, e.commit = p.endpointOf(k)
		e.built, e.sub = e.commit, fmt.Sprintf("calibration-%d", m.seq)
		which := "bad"
		if k.Commit == culprit.GoodEndpoint {
			which = "good"
		}
		p.r.ev.line("%s: boot of the %s endpoint, for its level and the model", pipe.Name, which)
	case k.Why == drive.WalkingBack:
		rel := p.walk.releases[k.Release]
		e.commit = rel.Commit.String()
		e.built, e.sub = e.commit, fmt.Sprintf("walk-%d", m.seq)
		p.r.ev.line("%s: boot of %s, walking back", pipe.Name, rel.Tag)
	default:
		e.step = culprit.Step{Kind: culprit.Measure, Commit: k.Commit, Reverted: k.Reverted, Confirming: k.Why == drive.Confirming}
		e.commit = p.commitOf(e.step)
		e.built, e.sub = e.commit, fmt.Sprintf("boot-%d", m.seq)
		if k.Reverted {
			e.revert = p.startRevert(m.ctx, k.Commit)
		}
		p.announce(e.step, e.commit, e.built, pipe.Name)
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.ends <- m.run(e, pipe, more)
	}()
}

// run is machine e.i's boot, in its goroutine: the revert it needs made
// first, then built, booted and measured, its files saved.
func (m *machinePool) run(e machineEnd, pipe *lab.Pipeline, more func([]float64) bool) machineEnd {
	if err := m.down[e.i]; err != nil {
		e.err = err
		return e
	}
	if e.revert != nil {
		select {
		case <-e.revert.done:
		case <-m.ctx.Done():
			e.err = m.ctx.Err()
			return e
		}
		e.reverted = true
		if e.revert.err != nil {
			return e // Wait says what it was
		}
		e.built = e.revert.hash
	}
	e.ev, e.err = pipe.BootOnce(m.ctx, e.built, e.sub, func(v []float64) bool { return more(m.p.badness(v)) })
	if e.err == nil && len(e.ev.Values) > 0 {
		if err := lab.SaveBoot(m.p.r.stateDir, e.sub, e.ev); err != nil {
			e.err = fmt.Errorf("%w: %w", errNotTheMachines, err)
		}
	}
	return e
}

// errNotTheMachines marks a boot's error that is this computer's (its
// state directory), not the machine's: it stops the run.
var errNotTheMachines = errors.New("the state directory")

// Wait hands back the next boot to end, journaled: a machine that stops
// answering (lab.HostLostError) or failed its preflight is lost for the
// run, and the others go on.
func (m *machinePool) Wait(ctx context.Context) (int, drive.Boot, error) {
	var e machineEnd
	select {
	case e = <-m.ends:
	case <-ctx.Done():
		return 0, drive.Boot{}, ctx.Err()
	}
	p, name := m.p, m.pipes[e.i].Name
	if p.hookErr != nil {
		return e.i, drive.Boot{}, p.hookErr
	}
	if e.reverted {
		if e.revert.err != nil {
			delete(p.making, e.k.Commit) // asked for again, tried again
			b, err := p.noRevert(e.step, e.commit, e.revert.err)
			return e.i, b, err
		}
		p.reverts[e.k.Commit] = e.revert.hash
	}
	var hl *lab.HostLostError
	switch {
	case e.err != nil && (m.down[e.i] != nil || errors.As(e.err, &hl)) && ctx.Err() == nil:
		if m.why[e.i] == "" {
			m.why[e.i] = e.err.Error()
			p.r.ev.line("%s is lost for this run: %v; the other machines go on", name, e.err)
		}
		return e.i, drive.Boot{}, fmt.Errorf("%s: %w: %w", name, drive.ErrMachineLost, e.err)
	case e.err != nil:
		return e.i, drive.Boot{}, e.err
	case e.k.Why == drive.Calibrating:
		b, err := p.tookEndpoint(e.commit, e.sub, name, e.ev)
		return e.i, b, err
	case e.k.Why == drive.WalkingBack:
		b, err := p.tookRelease(e.commit, e.sub, name, e.ev, e.began)
		return e.i, b, err
	}
	b, err := p.took(e.step, e.commit, e.built, e.sub, name, e.ev, e.began)
	return e.i, b, err
}

// live counts the machines not lost.
func (m *machinePool) live() int {
	n := 0
	for _, why := range m.why {
		if why == "" {
			n++
		}
	}
	return max(n, 1)
}

// summary is each machine's boots in the journal and why it was lost.
func (m *machinePool) summary() []lab.SearchMachine {
	out := make([]lab.SearchMachine, len(m.pipes))
	for i, pipe := range m.pipes {
		out[i] = lab.SearchMachine{Name: pipe.Name, Lost: m.why[i]}
	}
	for _, rec := range m.p.journal.Records() {
		if i, err := m.p.machineOf(rec); err == nil && rec.Kind != lab.SearchSkip {
			out[i].Boots++
		}
	}
	return out
}
