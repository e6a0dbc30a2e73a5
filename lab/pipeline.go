package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/internal/atomicfile"
	"kbisect/internal/commitid"
	"kbisect/internal/shell"
	"kbisect/kbuild"
	"kbisect/noise"
	"kbisect/remote"
)

// Phase is what the pipeline is doing with a commit.
type Phase string

// Phases of a commit's test.
const (
	PhaseBuild   Phase = "build"
	PhaseBoot    Phase = "boot"
	PhaseMeasure Phase = "measure"
)

// Event is what the pipeline tells its progress view.
type Event struct {
	Commit string
	Phase  Phase
	// Sample is the number of samples taken so far in PhaseMeasure, Value
	// the last one's (in the metric's unit, formatted with Kind).
	Sample int
	Value  float64
	Kind   string
	// Note says what happens, in a few words ("from the cache",
	// "retrying in 30s: …").
	Note string
	// Host names the machine when a run has several.
	Host string
}

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
	// Progress hears what the pipeline does (nil: nothing).
	Progress func(Event)
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
}

// Evidence is everything the pipeline learned about one commit.
type Evidence struct {
	Commit    string `json:"commit"`
	Release   string `json:"release,omitempty"`
	Signature string `json:"signature,omitempty"`
	// Verdict is good, bad or skip; Reason says why in a line.
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	// SameAs names the commit whose kernel had the same signature, when
	// its measurement was reused.
	SameAs   string          `json:"same_as,omitempty"`
	Build    *BuildInfo      `json:"build,omitempty"`
	Boots    []BootInfo      `json:"boots,omitempty"`
	Values   []float64       `json:"values,omitempty"`
	Metric   string          `json:"metric,omitempty"`
	Kind     string          `json:"kind,omitempty"`
	Decision *noise.Decision `json:"decision,omitempty"`
	// Samples are the parsed measurements, in the order taken.
	Samples []*noise.Measurement `json:"samples,omitempty"`
	Seconds float64              `json:"seconds"`

	// raw is the directory of the raw outputs, under the state directory.
	raw string
}

// BuildInfo is how the commit's kernel was built.
type BuildInfo struct {
	Artifact string  `json:"artifact"`
	Cached   bool    `json:"cached"`
	Seconds  float64 `json:"seconds"`
}

// BootInfo is one boot of the commit's kernel and what it measured.
type BootInfo struct {
	Release string `json:"release"`
	BootID  string `json:"boot_id"`
	Cmdline string `json:"cmdline"`
	Samples int    `json:"samples"`
}

// Verdicts of the evidence that are not the noise rule's.
const (
	verdictSkip = "skip"
)

func (p *Pipeline) say(e Event) {
	e.Host = p.Name
	if p.Progress != nil {
		p.Progress(e)
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

// evidencePath is where a commit's evidence is kept.
func (p *Pipeline) evidencePath(commit string) string {
	return filepath.Join(p.StateDir, "commits", commit+".json")
}

// load reads the evidence kept for a commit, if any.
func (p *Pipeline) load(commit string) (*Evidence, error) { return ReadEvidence(p.StateDir, commit) }

// ReadEvidence reads the evidence a state directory holds for a commit.
func ReadEvidence(stateDir, commit string) (*Evidence, error) {
	path := filepath.Join(stateDir, "commits", commit+".json")
	var ev Evidence
	if err := atomicfile.ReadJSON(path, &ev); err != nil {
		return nil, err
	}
	return &ev, nil
}

// ReadCalibration reads the calibration of a state directory (nil when
// there is none yet).
func ReadCalibration(stateDir string) (*Calibration, error) {
	var c Calibration
	if err := atomicfile.ReadJSON(filepath.Join(stateDir, "calibration.json"), &c); err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	return &c, nil
}

// ReadConfirmation reads the confirmation of a state directory (nil when
// there is none yet).
func ReadConfirmation(stateDir string) (*Confirmation, error) {
	var c Confirmation
	if err := atomicfile.ReadJSON(filepath.Join(stateDir, "confirmation.json"), &c); err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	return &c, nil
}

// save writes a commit's evidence atomically.
func (p *Pipeline) save(ev *Evidence) error {
	return atomicfile.WriteJSON(p.evidencePath(ev.Commit), ev)
}

// init loads what earlier runs in the state directory measured: the
// kernels by signature.
func (p *Pipeline) init() error {
	if p.bySig != nil {
		return nil
	}
	p.bySig = map[string]*Evidence{}
	entries, err := os.ReadDir(filepath.Join(p.StateDir, "commits"))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		ev, err := p.load(name)
		if err != nil {
			return err
		}
		if ev.Signature != "" && ev.SameAs == "" && (ev.Verdict == string(noise.Good) || ev.Verdict == string(noise.Bad)) {
			p.bySig[ev.Signature] = ev
		}
	}
	return nil
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
	case string(noise.Good):
		return bisect.Outcome{Verdict: bisect.Good, Note: ev.Reason}
	case string(noise.Bad):
		return bisect.Outcome{Verdict: bisect.Bad, Note: ev.Reason}
	}
	return bisect.Outcome{Verdict: bisect.Skip, Note: ev.Reason}
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
	if ev.Signature != "" && ev.SameAs == "" && (ev.Verdict == string(noise.Good) || ev.Verdict == string(noise.Bad)) {
		p.bySig[ev.Signature] = ev
	}
	return ev, nil
}

// test builds, boots and measures one commit. samples > 0 takes exactly
// that many samples (calibration, confirmation) instead of the rule's
// sequential count; the raw outputs go to commits/<hash>/<sub>.
func (p *Pipeline) test(ctx context.Context, commit string, samples int, sub string) (*Evidence, error) {
	start := time.Now()
	ev := &Evidence{Commit: commit, raw: filepath.Join(p.StateDir, "commits", commit, sub)}
	defer func() {
		ev.Seconds = time.Since(start).Seconds()
		if ctx.Err() != nil {
			p.abandoned = true
		}
	}()

	p.say(Event{Commit: commit, Phase: PhaseBuild})
	var a *kbuild.Artifact
	var err error
	if be := p.aheadFailed(ctx, commit); be != nil {
		err = be // built ahead, and it does not build: not again
	} else {
		a, err = kbuild.Build(ctx, p.Build, p.Slot, commit)
	}
	if p.Ahead != nil {
		p.Ahead.Go()
	}
	var be *kbuild.BuildError
	switch {
	case errors.As(err, &be):
		ev.Verdict = p.failure(p.Job.Build.OnFailure)
		ev.Reason = "does not build: " + firstOr(be.Lines, err.Error())
		return ev, nil
	case err != nil:
		return nil, fmt.Errorf("build %s: %w", commitid.Short(commit), err)
	}
	ev.Release, ev.Signature = a.Release, a.Signature
	ev.Build = &BuildInfo{Artifact: a.Dir, Cached: a.Cached, Seconds: a.Took.Seconds()}
	if a.Cached {
		p.say(Event{Commit: commit, Phase: PhaseBuild, Note: "from the cache"})
	}
	if same := p.bySig[a.Signature]; same != nil && samples == 0 {
		ev.Verdict, ev.SameAs = same.Verdict, same.Commit
		ev.Reason = fmt.Sprintf("the same kernel as %s (signature %s): %s", commitid.Short(same.Commit), commitid.Short(a.Signature), same.Reason)
		ev.Values, ev.Decision, ev.Metric, ev.Kind = same.Values, same.Decision, same.Metric, same.Kind
		return ev, nil
	}
	art, err := remote.LoadArtifact(a.Dir)
	if err != nil {
		return nil, err
	}
	if err := p.measure(ctx, ev, art, samples); err != nil {
		return nil, err
	}
	return ev, nil
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
func (p *Pipeline) failure(onFailure string) string {
	if onFailure == string(noise.Bad) {
		return string(noise.Bad)
	}
	return verdictSkip
}

// measure boots the kernel as many times as the job asks and samples it,
// until the rule decides or the samples run out. A connection the lab
// drops mid-measurement costs a boot, not the run: the kernel is booted
// again (up to Retries times) and sampling goes on.
func (p *Pipeline) measure(ctx context.Context, ev *Evidence, art remote.Artifact, fixed int) error {
	job := p.Job
	w, err := Workload(job, nil)
	if err != nil {
		return err
	}
	rule := p.rule
	if fixed > 0 {
		rule.MinSamples, rule.MaxSamples = fixed, fixed
	}
	// Before calibration a ratio or auto rule has nothing to compare
	// with: the samples are only taken.
	canDecide := !p.measureOnly && (rule.Kind == noise.Absolute || (len(rule.Good) > 0 && (rule.Kind != noise.Auto || len(rule.Bad) > 0)))
	boots := max(1, job.Verdict.Boots)
	// Every boot gives its share of the minimum; the last one goes on
	// while the rule is unsure.
	perBoot := (rule.MinSamples + boots - 1) / boots
	ev.Metric, ev.Kind = job.Verdict.Metric, rule.MetricKind
	drops := 0
	for b := 0; b < boots; b++ {
		last := b == boots-1
		taken := 0
		for decided := false; !decided; {
			m, facts, kerr, err := p.bootRetrying(ctx, ev.Commit, art)
			if err != nil {
				return err
			}
			if kerr != nil {
				ev.Verdict = p.failure(job.Boot.OnFailure)
				ev.Reason = "does not boot: " + kerr.Reason
				if kerr.Panic != "" {
					ev.Reason += " (" + kerr.Panic + ")"
				}
				return nil
			}
			ev.Boots = append(ev.Boots, BootInfo{Release: facts.Release, BootID: facts.BootID, Cmdline: facts.Cmdline})
			err = p.sleep(ctx, job.Boot.Settle.D())
			for err == nil && !decided {
				if (!last && taken >= perBoot) || len(ev.Values) >= rule.MaxSamples {
					decided = true
					break
				}
				var v float64
				var done *Evidence
				v, done, err = p.sample(ctx, ev, w, m, art)
				if err != nil || done != nil {
					m.Close()
					if done != nil {
						return nil
					}
					break
				}
				taken++
				ev.Boots[len(ev.Boots)-1].Samples++
				p.say(Event{Commit: ev.Commit, Phase: PhaseMeasure, Sample: len(ev.Values), Value: v, Kind: rule.MetricKind})
				if last && !canDecide {
					decided = len(ev.Values) >= rule.MaxSamples
				} else if last {
					d, derr := rule.Decide(ev.Values)
					if derr != nil {
						m.Close()
						return derr
					}
					ev.Decision = &d
					decided = !d.More
				}
			}
			m.Close()
			var ie *remote.InfraError
			if err == nil {
				continue
			}
			if !errors.As(err, &ie) || ctx.Err() != nil || drops >= p.retries() {
				return err
			}
			drops++
			wait := p.backoff() << (drops - 1)
			p.say(Event{Commit: ev.Commit, Phase: PhaseMeasure, Note: fmt.Sprintf("the lab dropped the measurement (%v): booting again in %s", err, wait)})
			if err := p.sleep(ctx, wait); err != nil {
				return err
			}
		}
	}
	d := ev.Decision
	switch {
	case d == nil && p.measureOnly:
		ev.Reason = fmt.Sprintf("%d samples", len(ev.Values))
	case d == nil && !canDecide:
		ev.Reason = fmt.Sprintf("%d samples for calibration", len(ev.Values))
	case d == nil:
		return fmt.Errorf("%s: no decision after %d samples", commitid.Short(ev.Commit), len(ev.Values))
	default:
		setVerdict(ev, *d)
	}
	return nil
}

// setVerdict gives an evidence the decision's verdict: good, bad, or skip
// when unsure.
func setVerdict(ev *Evidence, d noise.Decision) {
	ev.Decision = &d
	if d.Verdict == noise.Good || d.Verdict == noise.Bad {
		ev.Verdict, ev.Reason = string(d.Verdict), d.Reason
		return
	}
	ev.Verdict, ev.Reason = verdictSkip, "unsure: "+d.Reason
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

// sample takes one sample on the machine and keeps its raw output. A
// sample that ran but is no evidence is taken again once; a workload the
// kernel cannot run ends the commit's test (done is its evidence).
func (p *Pipeline) sample(ctx context.Context, ev *Evidence, w noise.Workload, m Machine, art remote.Artifact) (float64, *Evidence, error) {
	var lastErr error
	for try := 0; try < 2; try++ {
		meas, raw, err := w.Measure(ctx, m)
		n := len(ev.Values) + 1
		if werr := saveRaw(ev.raw, n, try, raw); werr != nil {
			return 0, nil, werr
		}
		var se *noise.SetupError
		if errors.As(err, &se) {
			if se.Kernel {
				ev.Verdict, ev.Reason = verdictSkip, "the kernel cannot run the workload: "+se.Msg
				return 0, ev, nil
			}
			return 0, nil, fmt.Errorf("%s: %w", art.Release, err)
		}
		if err != nil {
			return 0, nil, fmt.Errorf("sample %d of %s: %w", n, commitid.Short(ev.Commit), err)
		}
		if err := meas.Usable(); err != nil {
			lastErr = err
			continue
		}
		v, err := SampleValue(p.Job, meas)
		if err != nil {
			return 0, nil, fmt.Errorf("sample %d of %s: %w", n, commitid.Short(ev.Commit), err)
		}
		ev.Samples = append(ev.Samples, meas)
		ev.Values = append(ev.Values, v)
		return v, nil, nil
	}
	return 0, nil, fmt.Errorf("sample %d of %s: twice no evidence: %w", len(ev.Values)+1, commitid.Short(ev.Commit), lastErr)
}

// saveRaw keeps what a sample printed: <dir>/sample-<n>[.retry-<k>].out
// and .err.
func saveRaw(dir string, n, try int, raw noise.Raw) error {
	if len(raw.Stdout) == 0 && len(raw.Stderr) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	name := fmt.Sprintf("sample-%d", n)
	if try > 0 {
		name += fmt.Sprintf(".retry-%d", try)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, name+".out"), raw.Stdout); err != nil {
		return err
	}
	if len(raw.Stderr) > 0 {
		return atomicfile.WriteFile(filepath.Join(dir, name+".err"), raw.Stderr)
	}
	return nil
}

// bootRetrying boots the artifact, retrying the lab's failures with
// backoff. A kernel failure is returned as kerr, not retried: it is the
// commit's.
func (p *Pipeline) bootRetrying(ctx context.Context, commit string, art remote.Artifact) (Machine, remote.Facts, *remote.KernelError, error) {
	boot := p.Boot
	if boot == nil {
		boot = func(ctx context.Context, art remote.Artifact) (Machine, remote.Facts, error) {
			if p.abandoned {
				p.say(Event{Commit: commit, Phase: PhaseBoot, Note: "waiting for the host: the step before it was stopped midway"})
				if err := WaitForHost(ctx, p.Job); err != nil {
					return nil, remote.Facts{}, err
				}
				p.abandoned = false
			}
			console, closeConsole := p.consoleLog(commit)
			defer closeConsole()
			h, f, err := BootArtifact(ctx, p.Job, art, console)
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
		p.say(Event{Commit: commit, Phase: PhaseBoot})
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
		case try >= retries:
			return nil, facts, nil, fmt.Errorf("boot %s: the lab failed %d times, the last: %w", art.Release, try+1, err)
		}
		if facts.Release != "" && facts.Release != art.Release {
			wrong = facts.Release
		}
		wait := backoff << try
		p.say(Event{Commit: commit, Phase: PhaseBoot, Note: fmt.Sprintf("retrying in %s: %v", wait, err)})
		if err := p.sleep(ctx, wait); err != nil {
			return nil, facts, nil, err
		}
	}
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

func firstOr(lines []string, def string) string {
	if len(lines) > 0 {
		return lines[0]
	}
	return def
}
