package lab

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/internal/commitid"
	"kbisect/internal/shell"
	"kbisect/kbuild"
	"kbisect/noise"
	"kbisect/progress"
	"kbisect/remote"
	"kbisect/verdict"
)

// Phase is what the pipeline is doing with a commit.
type Phase string

// Phases of a commit's test.
const (
	PhaseBuild   Phase = "build"
	PhaseBoot    Phase = "boot"
	PhaseMeasure Phase = "measure"
)

// Machine is a booted test kernel the workload runs on.
type Machine interface {
	shell.Runner
	Close() error
}

// Pipeline turns a commit into a verdict on the job's lab: build (the
// cache first), install, boot and verify, settle, measure, decide. Every
// commit's evidence is written to the state directory before its verdict
// is returned, so a run killed at any point loses no finished step.
type Pipeline struct {
	Job   *configs.Job
	Build kbuild.Options
	// Slot is the build slot this pipeline builds in (one per machine
	// when several test at once).
	Slot int
	// Name names the machine in events when a run has several ("": one).
	Name string
	// StateDir holds commits/<hash>.json (the evidence), the raw tool
	// outputs under commits/<hash>/, and calibration.json.
	StateDir string
	// Boot boots an artifact on the lab and verifies it (nil: the job's
	// host over SSH, BootArtifact). A *remote.KernelError is the
	// kernel's failure, anything else the lab's.
	Boot func(ctx context.Context, art remote.Artifact) (Machine, remote.Facts, error)
	// Progress hears what the pipeline does, as progress.Phase events
	// (nil: nothing).
	Progress progress.Sink
	// Retries is how many times a failure of the lab (SSH, the host) is
	// retried in one step before the run stops (default 2); Backoff the
	// first wait (default 30s), doubled each time.
	Retries int
	Backoff time.Duration
	// Sleep waits (settle time, backoff); nil: a timer. Simulations pass
	// one that does not wait.
	Sleep func(ctx context.Context, d time.Duration) error
	// Ahead builds the next commits while this one is measured (nil:
	// none).
	Ahead *Ahead
	// UnderWay, shared by the pipelines of several machines, makes one
	// that needs a kernel another is building wait for it (nil: none).
	UnderWay *UnderWay
	// Built, when set, hears that the kernel of a commit about to boot
	// is in the cache: another machine would boot it without a build.
	Built func(commit string)
	// BaseFile is where the base command line of the machine's test
	// kernels is recorded at the first boot, and read again by a resumed
	// run ("": found at this pipeline's first boot, recorded nowhere).
	BaseFile string

	rule  noise.Rule
	ready bool
	// measureOnly takes the samples without a verdict (A/B rounds: the
	// comparison is the verdict).
	measureOnly bool
	// abandoned says the last test was stopped midway: the host may be
	// in the middle of a reboot.
	abandoned bool
	// bySig holds the verdicts of kernels by their code signature: two
	// commits that built the same binary share one measurement.
	bySig map[string]*Evidence
	// base is the base command line, once found.
	base *remote.Base
	// toLab is how the build server sends kernels to this pipeline's
	// host (nil: through this controller), once toLabSet.
	toLab    *ToLab
	toLabSet bool
}

// say tells the progress what happens to commit in phase: note, in a
// few words ("from the cache", "retrying in 30s: …"), or nothing.
func (p *Pipeline) say(commit string, phase Phase, note string) {
	if p.Progress != nil {
		p.Progress.Emit(progress.Event{Kind: progress.Phase, Commit: commit, Host: p.Name, Phase: string(phase), Text: note})
	}
}

// sampled tells the progress the n-th sample's value, in its unit.
func (p *Pipeline) sampled(commit string, n int, value string) {
	if p.Progress != nil {
		p.Progress.Emit(progress.Event{Kind: progress.Phase, Commit: commit, Host: p.Name, Phase: string(PhaseMeasure), Sample: n, Value: value})
	}
}

func (p *Pipeline) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Rule is the verdict rule the pipeline decides with: the job's, with the
// endpoints' samples once calibrated.
func (p *Pipeline) Rule() noise.Rule { return p.rule }

// SetRule sets the verdict rule (calibration does it).
func (p *Pipeline) SetRule(r noise.Rule) {
	p.rule, p.ready = r, true
}

// Test implements bisect.TestFunc: the commit's verdict from its
// evidence, measured now or kept from before.
func (p *Pipeline) Test(ctx context.Context, commit plumbing.Hash) (bisect.Outcome, error) {
	ev, err := p.Evidence(ctx, commit.String())
	if err != nil {
		return bisect.Outcome{}, err
	}
	return outcome(ev), nil
}

func outcome(ev *Evidence) bisect.Outcome {
	switch ev.Verdict {
	case verdict.Good, verdict.Bad:
		return bisect.Outcome{Verdict: ev.Verdict, Note: ev.Reason}
	}
	return bisect.Outcome{Verdict: verdict.Skip, Note: ev.Reason}
}

// Evidence returns a commit's evidence: kept from an earlier run in the
// state directory, or measured now and kept.
func (p *Pipeline) Evidence(ctx context.Context, commit string) (*Evidence, error) {
	if err := p.init(); err != nil {
		return nil, err
	}
	if ev, err := p.load(commit); err == nil {
		return ev, nil
	}
	if !p.ready {
		r, err := Rule(p.Job, nil, nil)
		if err != nil {
			return nil, err
		}
		if r.Kind != noise.Absolute {
			return nil, fmt.Errorf("verdict.threshold %s needs the endpoints measured first (calibration)", p.Job.Verdict.Threshold)
		}
		p.SetRule(r)
	}
	ev, err := p.test(ctx, commit, 0, "")
	if err != nil {
		return nil, err
	}
	if err := p.save(ev); err != nil {
		return nil, err
	}
	if ev.Signature != "" && ev.SameAs == "" && (ev.Verdict == verdict.Good || ev.Verdict == verdict.Bad) {
		p.bySig[ev.Signature] = ev
	}
	return ev, nil
}

// test builds, boots and measures one commit. samples > 0 takes exactly
// that many samples (calibration, confirmation) instead of the rule's
// sequential count; the raw outputs go to commits/<hash>/<sub>.
func (p *Pipeline) test(ctx context.Context, commit string, samples int, sub string) (*Evidence, error) {
	ev, done := p.begin(ctx, commit, sub)
	defer done()

	art, err := p.built(ctx, ev)
	if err != nil {
		return nil, err
	}
	if art == nil {
		return ev, nil // it does not build: ev says why
	}
	if same := p.bySig[ev.Signature]; same != nil && samples == 0 {
		ev.Verdict, ev.SameAs = same.Verdict, same.Commit
		ev.Reason = fmt.Sprintf("the same kernel as %s (signature %s): %s", commitid.Short(same.Commit), commitid.Short(ev.Signature), same.Reason)
		ev.Values, ev.Decision, ev.Metric, ev.Kind = same.Values, same.Decision, same.Metric, same.Kind
		return ev, nil
	}
	if err := p.measure(ctx, ev, *art, samples); err != nil {
		return nil, err
	}
	return ev, nil
}

// built builds ev's commit (the cache first) and fills in what the build
// says; a kernel that does not build gives no artifact and ev says why.
func (p *Pipeline) built(ctx context.Context, ev *Evidence) (*remote.Artifact, error) {
	commit := ev.Commit
	p.say(commit, PhaseBuild, "")
	a, err := p.kernel(ctx, commit)
	var be *kbuild.BuildError
	switch {
	case errors.As(err, &be):
		ev.fail(p.failure(p.Job.Build.OnFailure), FailBuild, "does not build: "+firstOr(be.Lines, err.Error()), be.Lines...)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("build %s: %w", commitid.Short(commit), err)
	}
	if p.Built != nil {
		p.Built(commit)
	}
	ev.Release, ev.Signature = a.Release, a.Signature
	ev.Build = &BuildInfo{Artifact: a.Dir, Cached: a.Cached, Seconds: a.Took.Seconds()}
	if a.Cached {
		p.say(commit, PhaseBuild, "from the cache")
	}
	art, err := remote.LoadArtifact(a.Dir)
	if err != nil {
		return nil, err
	}
	return &art, nil
}

// kernel builds commit's kernel in the pipeline's slot (the cache
// first), making way for the builds ahead and letting them go on after;
// on several machines, after any other pipeline's build of it (UnderWay).
func (p *Pipeline) kernel(ctx context.Context, commit string) (_ *kbuild.Artifact, err error) {
	if be := p.aheadFailed(ctx, commit); be != nil {
		return nil, be // built ahead, and it does not build: not again
	}
	if p.UnderWay != nil {
		release, be, cerr := p.UnderWay.claim(ctx, commit)
		switch {
		case cerr != nil:
			return nil, cerr
		case be != nil:
			return nil, be // another machine's pipeline found it does not build
		}
		defer func() { release(err) }()
	}
	a, err := kbuild.Build(ctx, p.Build, p.Slot, commit)
	if p.Ahead != nil {
		p.Ahead.Go()
	}
	return a, err
}

// intact returns the artifact of commit in dir, its files checked
// against the sums its build recorded, before it goes to the host: one
// damaged since (cut short by a power loss, a byte changed on disk) or
// gone from the cache is built again, never booted as the commit's
// kernel, whose failure it would not be.
func (p *Pipeline) intact(ctx context.Context, commit, dir string) (remote.Artifact, error) {
	var de *kbuild.DamagedError
	switch err := kbuild.Check(dir); {
	case errors.As(err, &de):
		p.say(commit, PhaseBuild, fmt.Sprintf("%v: building it again", de))
		a, err := p.kernel(ctx, commit)
		if err != nil {
			return remote.Artifact{}, fmt.Errorf("build %s again (%v): %w", commitid.Short(commit), de, err)
		}
		dir = a.Dir
	case err != nil:
		return remote.Artifact{}, fmt.Errorf("%s: %w", commitid.Short(commit), err)
	}
	return remote.LoadArtifact(dir)
}

// aheadFailed makes way for the pipeline's build (Ahead.Wait) and says
// whether the commit already failed to build ahead.
func (p *Pipeline) aheadFailed(ctx context.Context, commit string) *kbuild.BuildError {
	if p.Ahead == nil {
		return nil
	}
	return p.Ahead.Wait(ctx, commit)
}

// failure is the verdict a kernel failure gets: skip, or bad when the job
// says so.
func (p *Pipeline) failure(onFailure string) verdict.Verdict {
	if onFailure == configs.FailureBad {
		return verdict.Bad
	}
	return verdict.Skip
}

func (p *Pipeline) retries() int {
	if p.Retries == 0 {
		return 2
	}
	return p.Retries
}

func (p *Pipeline) backoff() time.Duration {
	if p.Backoff == 0 {
		return 30 * time.Second
	}
	return p.Backoff
}

func firstOr(lines []string, def string) string {
	if len(lines) > 0 {
		return lines[0]
	}
	return def
}

// BootOnce builds a commit's kernel (the cache first), boots it once and
// samples it while more says so: one boot, the unit of evidence of a
// noise-robust search, which judges the samples itself. Its raw outputs
// go to commits/<hash>/<sub>. A kernel that does not build, boot or run
// the workload comes back with verdict skip (or bad, as the job says)
// and the reason; an error is the lab's.
func (p *Pipeline) BootOnce(ctx context.Context, commit, sub string, more func(values []float64) bool) (*Evidence, error) {
	if err := p.initAlone(); err != nil {
		return nil, err
	}
	ev, done := p.begin(ctx, commit, sub)
	defer done()
	art, err := p.built(ctx, ev)
	if err != nil {
		return nil, err
	}
	if art == nil {
		return ev, nil // it does not build: ev says why
	}
	s, err := p.planSampling(*art, 0)
	if err != nil {
		return nil, err
	}
	s.boots, s.more = 1, more
	if err := p.measureWith(ctx, ev, s); err != nil {
		return nil, err
	}
	return ev, nil
}

// begin starts a commit's evidence, its raw outputs under
// commits/<hash>/<sub>; done, deferred, times it and notes a test stopped
// midway (the host may be in the middle of a reboot).
func (p *Pipeline) begin(ctx context.Context, commit, sub string) (ev *Evidence, done func()) {
	start := time.Now()
	ev = &Evidence{Commit: commit, raw: filepath.Join(p.StateDir, "commits", commit, sub)}
	return ev, func() {
		ev.Seconds = time.Since(start).Seconds()
		if ctx.Err() != nil {
			p.abandoned = true
		}
	}
}
