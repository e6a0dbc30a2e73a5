package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"kbisect/internal/atomicfile"
	"kbisect/noise"
	"kbisect/verdict"
)

// Evidence is everything the pipeline learned about one commit.
type Evidence struct {
	Commit    string `json:"commit"`
	Release   string `json:"release,omitempty"`
	Signature string `json:"signature,omitempty"`
	// Verdict is good, bad or skip; Reason says why in a line.
	Verdict verdict.Verdict `json:"verdict"`
	Reason  string          `json:"reason"`
	// Failure is the commit's own failure that made the verdict (a skip,
	// or bad when the job bisects failures): its class and evidence.
	Failure *Failure `json:"failure,omitempty"`
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

// FailureClass is which of a commit's own failures kept it from being
// measured. The lab's failures have none: they never become verdicts.
type FailureClass string

// The classes of a commit's failures.
const (
	// FailBuild: a compile or link error in the commit's tree.
	FailBuild FailureClass = "does-not-build"
	// FailBoot: the kernel did not come back, panicked, or kexec refused
	// its image.
	FailBoot FailureClass = "does-not-boot"
	// FailWorkload: the kernel lacks what the workload needs (a tracer,
	// NUMA).
	FailWorkload FailureClass = "cannot-run-workload"
	// FailHang: the kernel booted, then hung the host in the middle of
	// the workload on two boots, the host back after a power cycle each
	// time (so the lab works, and the hang is the kernel's).
	FailHang FailureClass = "hangs-the-host"
	// FailUnsure: measured, but the verdict rule could not decide.
	FailUnsure FailureClass = "unsure"
)

// Failure is a commit's own failure: its class and what showed it (the
// build's error lines, the kernel's reason and panic line, the
// workload's words).
type Failure struct {
	Class    FailureClass `json:"class"`
	Evidence []string     `json:"evidence,omitempty"`
}

// fail records a commit's own failure as its verdict v and reason.
func (ev *Evidence) fail(v verdict.Verdict, class FailureClass, reason string, evidence ...string) {
	ev.Verdict, ev.Reason = v, reason
	ev.Failure = &Failure{Class: class, Evidence: evidence}
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
	return readIfThere[Calibration](filepath.Join(stateDir, "calibration.json"))
}

// ReadConfirmation reads the confirmation of a state directory (nil when
// there is none yet).
func ReadConfirmation(stateDir string) (*Confirmation, error) {
	return readIfThere[Confirmation](filepath.Join(stateDir, "confirmation.json"))
}

// readIfThere reads a JSON state file: nil when it is not there yet.
func readIfThere[T any](path string) (*T, error) {
	var v T
	if err := atomicfile.ReadJSON(path, &v); err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	return &v, nil
}

// save writes a commit's evidence atomically.
func (p *Pipeline) save(ev *Evidence) error {
	return atomicfile.WriteJSON(p.evidencePath(ev.Commit), ev)
}

// init loads what earlier runs in the state directory measured: the
// kernels by signature.
// initAlone readies the pipeline to measure kernels without judging each
// against the endpoints: a ratio or auto rule, which calibration sets for
// a bisection, decides nothing per round, so the job's own rule serves
// when none is set.
func (p *Pipeline) initAlone() error {
	if err := p.init(); err != nil {
		return err
	}
	if !p.ready {
		r, err := Rule(p.Job, nil, nil)
		if err != nil {
			return err
		}
		p.SetRule(r)
	}
	return nil
}

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
		if ev.Signature != "" && ev.SameAs == "" && (ev.Verdict == verdict.Good || ev.Verdict == verdict.Bad) {
			p.bySig[ev.Signature] = ev
		}
	}
	return nil
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

// ofRule is the evidence's verdict for a noise rule's: good and bad
// stand, and a rule not sure (Unsure) is a skip, since a bisection cannot
// place an unsure kernel. It is the one place where a rule's verdict
// becomes a bisection's.
func ofRule(v verdict.Verdict) verdict.Verdict {
	if v == verdict.Good || v == verdict.Bad {
		return v
	}
	return verdict.Skip
}
