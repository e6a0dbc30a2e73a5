package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"kbisect/remote"
)

// bootRetrying boots the artifact, retrying the lab's failures with
// backoff. A kernel failure is returned as kerr, not retried: it is the
// commit's. A host key that does not match known_hosts stops at once.
func (p *Pipeline) bootRetrying(ctx context.Context, commit string, art remote.Artifact) (Machine, remote.Facts, *remote.KernelError, error) {
	boot := p.Boot
	if boot == nil {
		boot = func(ctx context.Context, art remote.Artifact) (Machine, remote.Facts, error) {
			if p.abandoned {
				p.say(commit, PhaseBoot, "waiting for the host: the step before it was stopped midway")
				if err := WaitForHost(ctx, p.Job); err != nil {
					return nil, remote.Facts{}, err
				}
				p.abandoned = false
			}
			if _, err := p.baseCmdline(ctx); err != nil {
				return nil, remote.Facts{}, err
			}
			console, closeConsole := p.consoleLog(commit)
			defer closeConsole()
			// The build server sends to this pipeline's host, as its own
			// job says: machines that share a server each have their own.
			server, _ := p.Build.Server.(*BuildServer)
			if !p.toLabSet {
				p.toLab, p.toLabSet = toLabOf(p.Job), true
			}
			say := func(note string) { p.say(commit, PhaseBoot, note) }
			h, f, err := bootArtifact(ctx, p.Job, art, *p.base, console, server, p.toLab, say)
			if err != nil {
				if h != nil {
					h.Close() // a kernel that is not the one asked for
				}
				return nil, f, err
			}
			return h, f, nil
		}
	}
	retries, backoff := p.retries(), p.backoff()
	wrong := "" // a kernel the lab booted instead of the one asked for
	for try := 0; ; try++ {
		art, err := p.intact(ctx, commit, filepath.Dir(art.Image))
		if err != nil {
			return nil, remote.Facts{}, nil, err
		}
		p.say(commit, PhaseBoot, "")
		m, facts, err := boot(ctx, art)
		var ke *remote.KernelError
		if errors.As(err, &ke) && wrong != "" && ke.CameBackOn == wrong {
			// Back on the kernel the lab booted instead of ours last time:
			// the lab boots the wrong kernel, it is not this one's panic.
			err, ke = fmt.Errorf("the host booted %s again instead of %s", wrong, art.Release), nil
		}
		switch {
		case err == nil:
			return m, facts, nil, nil
		case ke != nil:
			return nil, facts, ke, nil
		case ctx.Err() != nil:
			return nil, facts, nil, ctx.Err()
		case errors.As(err, new(*remote.HostKeyError)):
			// A host key that changed or is unknown does not come right
			// by waiting: someone must look at the machine.
			return nil, facts, nil, fmt.Errorf("boot %s: stopped at once, a host key is not retried: %w", art.Release, err)
		case try >= retries:
			return nil, facts, nil, fmt.Errorf("boot %s: the lab failed %d times, the last: %w", art.Release, try+1, err)
		}
		if facts.Release != "" && facts.Release != art.Release {
			wrong = facts.Release
		}
		if p.Boot == nil {
			// A host that no longer answers (hung mid-measurement) does
			// not come back by waiting: its power is cycled, as after a
			// kernel that did not come back.
			cycled, err := p.recoverUnanswering(ctx, commit)
			if err != nil {
				return nil, facts, nil, fmt.Errorf("boot %s: %w", art.Release, err)
			}
			if cycled {
				continue
			}
		}
		wait := backoff << try
		p.say(commit, PhaseBoot, fmt.Sprintf("retrying in %s: %v", wait, err))
		if err := p.sleep(ctx, wait); err != nil {
			return nil, facts, nil, err
		}
	}
}

// recoverUnanswering power-cycles the host when it does not answer SSH
// and the job can (boot.power_cycle), and waits for it, up to
// boot.timeout. It says whether it did; a host that answers, or one that
// cannot be power-cycled, is left to the retries.
func (p *Pipeline) recoverUnanswering(ctx context.Context, commit string) (bool, error) {
	if p.Job.Boot.PowerCycle == "" {
		return false, nil
	}
	opt, err := HostOptions(p.Job)
	if err != nil {
		return false, err
	}
	dial := remote.DialerOf(opt)
	h, _, err := remote.Attempt(ctx, dial)
	if err == nil {
		h.Close()
		return false, nil
	}
	if errors.As(err, new(*remote.HostKeyError)) || ctx.Err() != nil {
		return false, nil // not a hang: the loop says what it is
	}
	p.say(commit, PhaseBoot, fmt.Sprintf("the host does not answer (%v): power-cycling it (boot.power_cycle)", err))
	env, err := commandEnv(p.Job, p.Job.Boot.PowerCycle)
	if err != nil {
		return false, err
	}
	f, err := remote.PowerCycle(ctx, dial, string(p.Job.Boot.PowerCycle), env, p.Job.Boot.Timeout.D())
	if err != nil {
		return false, &remote.InfraError{Host: opt.User + "@" + opt.Address, Op: "power cycle",
			Err: fmt.Errorf("the host stopped answering, and power-cycling it (boot.power_cycle) did not bring it back: %w", err)}
	}
	p.say(commit, PhaseBoot, "the host is back on "+f.Release+" after the power cycle")
	p.abandoned = false
	return true, nil
}

// consoleLog is where the console of a commit's boots goes, when the job
// has a console command; the function closes it.
func (p *Pipeline) consoleLog(commit string) (io.Writer, func()) {
	if p.Job.Boot.Console == "" {
		return nil, func() {}
	}
	dir := filepath.Join(p.StateDir, "commits", commit)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, func() {}
	}
	f, err := os.OpenFile(filepath.Join(dir, "console.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, func() {}
	}
	return f, func() { f.Close() }
}
