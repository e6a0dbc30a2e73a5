package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"kbisect/configs"
	"kbisect/kbuild"
	"kbisect/remote"
)

// ToLab is how a build server sends its kernels to one lab host itself
// (build.to_lab of that host's job): the lab host as the server reaches
// it, the key the server signs in with there, and whether it still does.
type ToLab struct {
	Address string
	Port    int
	User    string
	// Identity is a key file on the server; Lend lends this controller's
	// key for the lab host instead (LabIdentity, else the ssh-agent's).
	Identity    string
	Lend        bool
	LabIdentity string
	// Timeout bounds the server's connection to the lab host.
	Timeout time.Duration

	mu  sync.Mutex
	off error // why kernels go through this controller for the rest of the run
	// wait is how many installs go through this controller before the
	// server tries again, after a failure that may pass; misses counts
	// such failures in a row (up to 4: the wait stops growing at
	// maxWait).
	wait, misses int
}

// maxWait bounds the installs a run sends through this controller between
// two tries of a server whose connection keeps failing in passing.
const maxWait = 24

// toLabOf is the job's build.to_lab, nil when kernels go through this
// controller.
func toLabOf(job *configs.Job) *ToLab {
	t := job.Build.ToLab
	if !t.Direct || job.Boot.Method == configs.BootQEMU {
		return nil
	}
	to := &ToLab{Address: t.Address, Port: t.Port, User: job.Host.User, Identity: t.Identity,
		Lend: t.ForwardAgent, LabIdentity: string(job.Host.Identity), Timeout: job.Host.ConnectTimeout.D()}
	if to.Address == "" {
		to.Address = job.Host.Address
	}
	if to.Port == 0 {
		to.Port = job.Host.Port
	}
	return to
}

// Off says why kernels no longer go straight to the lab host (nil: they
// do).
func (t *ToLab) Off() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.off
}

func (t *ToLab) turnOff(why error) {
	t.mu.Lock()
	t.off = why
	t.mu.Unlock()
}

// waiting says whether this install goes through this controller while
// the server waits to try again, and counts it.
func (t *ToLab) waiting() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.wait > 0 {
		t.wait--
		return true
	}
	return false
}

// pause sends the next installs through this controller after a failure
// that may pass: 3, then twice as many after each failure in a row, up
// to maxWait; it returns how many.
func (t *ToLab) pause() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.wait = min(3<<t.misses, maxWait)
	t.misses = min(t.misses+1, 4)
	return t.wait
}

func (t *ToLab) sent() {
	t.mu.Lock()
	t.misses = 0
	t.mu.Unlock()
}

// install puts art on the lab host h (the one t describes): sent by the
// build server s itself when it can, else from here as always (t or s
// nil: from here). say hears how it went and, once, why the server could
// not.
func (t *ToLab) install(ctx context.Context, s *BuildServer, h *remote.Host, art remote.Artifact, inst remote.InstallOptions, say func(string)) error {
	if t == nil || s == nil || t.Off() != nil || t.waiting() {
		return h.Install(ctx, art, inst)
	}
	err := t.sendTo(ctx, s, h, art, inst)
	var ve *remote.ViaError
	switch {
	case err == nil:
		t.sent()
		say("sent by the build server straight to the lab host")
		return nil
	case !errors.As(err, &ve):
		return err // the install failed, not the copy
	case ctx.Err() != nil:
		return err // the boot was called off: no fault of the server's
	case ve.Once:
		say(fmt.Sprintf("%v: this kernel goes through this controller", err))
	case ve.Passing:
		n := t.pause()
		say(fmt.Sprintf("%v: this kernel and the next %d installs go through this controller, then the build server tries again", err, n))
	default:
		t.turnOff(err)
		say(fmt.Sprintf("%v: kernels go through this controller from now on", err))
	}
	return h.Install(ctx, art, inst)
}

// sendTo installs art on h from the server's cache, where the server's
// build left it under its key.
func (t *ToLab) sendTo(ctx context.Context, s *BuildServer, h *remote.Host, art remote.Artifact, inst remote.InstallOptions) error {
	key, err := kbuild.ArtifactKey(filepath.Dir(art.Image))
	if err != nil {
		return &remote.ViaError{From: "build server " + s.SSH.Address, Once: true, Err: err}
	}
	via, done, err := t.via(ctx, s, serverCache[1:]+"/artifacts/"+key)
	if err != nil {
		return err
	}
	defer done()
	inst.Via = via
	return h.Install(ctx, art, inst)
}

// via connects to the server s, lends it this controller's key for the
// lab host when the job says so, and returns how it sends dir's files
// to the lab host, with what closes it all.
func (t *ToLab) via(ctx context.Context, s *BuildServer, dir string) (*remote.Via, func(), error) {
	where := "build server " + s.SSH.Address
	srv, err := remote.Dial(ctx, s.SSH)
	if err != nil {
		return nil, nil, &remote.ViaError{From: where, Passing: remote.MayBeRebooting(err), Err: err}
	}
	var agentConn io.Closer
	var once sync.Once
	// Closing the connection takes back the keys lent on it.
	done := func() {
		once.Do(func() {
			srv.Close()
			if agentConn != nil {
				agentConn.Close()
			}
		})
	}
	if t.Lend {
		keys, closer, err := remote.LendableKeys(t.LabIdentity)
		agentConn = closer
		if err != nil {
			done()
			return nil, nil, &remote.ViaError{From: where, Err: fmt.Errorf("build.to_lab.forward_agent: %v", err)}
		}
		if err := srv.LendKeys(keys); err != nil {
			done()
			return nil, nil, &remote.ViaError{From: where, Err: err}
		}
	}
	return &remote.Via{From: srv, Dir: dir, Address: t.Address, Port: t.Port, User: t.User, Identity: t.Identity,
		Timeout: t.Timeout, Placed: done}, done, nil
}

// checked says, for host check's ready line, whether the build server s
// sends kernels to the lab host h itself: it signs in there as a copy
// would and runs true.
func (t *ToLab) checked(ctx context.Context, s *BuildServer, h *remote.Host) string {
	via, done, err := t.via(ctx, s, "")
	if err == nil {
		defer done()
		err = h.ProbeVia(ctx, *via)
	}
	if err != nil {
		return fmt.Sprintf("kernels will go through this controller, the build server cannot send them to the lab host itself (%v; see build.to_lab)", err)
	}
	return "the build server sends kernels to the lab host itself"
}
