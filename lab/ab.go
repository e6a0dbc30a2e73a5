package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"kbisect/internal/atomicfile"
	"kbisect/internal/commitid"
	"kbisect/noise"
)

// ABPlan is an A/B comparison: two kernels measured in alternating rounds
// on the same machine, A, B, A, B …, each round on a fresh boot, so the
// drift of a machine over a night weighs on both sides alike.
type ABPlan struct {
	// A and B are the commits (full hashes); ALabel and BLabel say what
	// they are ("v6.12.78", "v6.12.78 with 1a2b3c4d5e6f reverted").
	A      string `json:"a"`
	B      string `json:"b"`
	ALabel string `json:"a_label"`
	BLabel string `json:"b_label"`
	// Rounds is how many boots each side gets, Samples how many samples
	// each boot takes.
	Rounds  int `json:"rounds"`
	Samples int `json:"samples"`
	// Command is the kbisect command that makes (or resumes) it.
	Command string `json:"command,omitempty"`
	// Job is the SHA-256 of the job file the rounds are measured with: a
	// comparison is not resumed with another.
	Job string `json:"job_sha256,omitempty"`
	// JobState is "resolved" when the state keeps the job resolved, its
	// settings and inputs compared key by key on resume (else Job is the
	// job file's own digest, as an older kbisect kept it).
	JobState string `json:"job_state,omitempty"`
	// Name is the comparison's directory in the state directory ("":
	// "ab", kbisect ab's; a run's confirmation keeps two of its own).
	Name string `json:"name,omitempty"`
}

// ABResult is what an A/B comparison measured and what it shows.
type ABResult struct {
	Plan ABPlan `json:"plan"`
	// Rounds are in the order taken: A's round 1, B's round 1, A's 2 …
	Rounds []*ABRound `json:"rounds"`
	// Report compares B with A on the job's metric, each sample a value.
	Report *noise.ABReport `json:"report"`
	// Complete says every round was measured.
	Complete bool `json:"complete"`
}

// ABRound is one boot of one side and its samples.
type ABRound struct {
	Round    int       `json:"round"`
	Side     string    `json:"side"` // "a" or "b"
	Evidence *Evidence `json:"evidence"`
}

// abDir keeps an A/B comparison's rounds, each written before the next
// round starts, and its result.
func abDir(stateDir, name string) string {
	if name == "" {
		name = "ab"
	}
	return filepath.Join(stateDir, name)
}

func abRoundPath(dir string, round int, side string) string {
	return filepath.Join(dir, fmt.Sprintf("round-%02d-%s.json", round, side))
}

// AB measures the plan's two kernels in alternating rounds and compares
// them. Rounds already in the state directory are not measured again: a
// comparison killed at any point goes on where it stopped. A kernel that
// does not build or boot ends it with an error: there is nothing to
// compare.
func (p *Pipeline) AB(ctx context.Context, plan ABPlan) (*ABResult, error) {
	if plan.Rounds < 1 || plan.Samples < 1 {
		return nil, fmt.Errorf("A/B: rounds and samples must be at least 1 (have %d and %d)", plan.Rounds, plan.Samples)
	}
	if err := p.initAlone(); err != nil {
		return nil, err
	}
	// One boot per round, whatever the job's verdict.boots says, and no
	// verdict per round: the comparison is the verdict.
	job := p.Job
	j := *job
	j.Verdict.Boots = 1
	p.Job, p.measureOnly = &j, true
	defer func() { p.Job, p.measureOnly = job, false }()
	res := &ABResult{Plan: plan}
	for round := 1; round <= plan.Rounds; round++ {
		for _, side := range []struct{ name, commit string }{{"a", plan.A}, {"b", plan.B}} {
			r, err := p.abRound(ctx, abDir(p.StateDir, plan.Name), round, side.name, side.commit, plan.Samples)
			if err != nil {
				return res, err
			}
			res.Rounds = append(res.Rounds, r)
		}
	}
	res.Complete = true
	rep, err := CompareRounds(p.Job.Verdict.Metric, p.Job.Verdict.Aggregate, p.Job.Verdict.Confidence, plan, res.Rounds)
	if err != nil {
		return res, err
	}
	res.Report = rep
	return res, atomicfile.WriteJSON(filepath.Join(abDir(p.StateDir, plan.Name), "result.json"), res)
}

func (p *Pipeline) abRound(ctx context.Context, dir string, round int, side, commit string, samples int) (*ABRound, error) {
	path := abRoundPath(dir, round, side)
	var kept ABRound
	if err := atomicfile.ReadJSON(path, &kept); err == nil && kept.Evidence != nil && kept.Evidence.Commit == commit {
		return &kept, nil
	}
	ev, err := p.test(ctx, commit, samples, fmt.Sprintf("%s-round-%02d-%s", filepath.Base(dir), round, side))
	if err != nil {
		return nil, fmt.Errorf("A/B round %d, %s (%s): %w", round, side, commitid.Short(commit), err)
	}
	if len(ev.Values) != samples {
		// A kernel that fails now and then is not compared on what it
		// let through.
		return nil, &RoundError{Round: round, Side: side, Samples: samples, Evidence: ev}
	}
	r := &ABRound{Round: round, Side: side, Evidence: ev}
	return r, atomicfile.WriteJSON(path, r)
}

// RoundError is an A/B round whose kernel gave fewer samples than asked:
// it does not build or boot, or fails now and then. Its evidence says
// why.
type RoundError struct {
	Round    int
	Side     string // "a" or "b"
	Samples  int    // asked
	Evidence *Evidence
}

func (e *RoundError) Error() string {
	return fmt.Sprintf("A/B round %d: %s (%s) gave %d of %d samples: %s", e.Round, e.Side, commitid.Short(e.Evidence.Commit), len(e.Evidence.Values), e.Samples, e.Evidence.Reason)
}

// Pooled is one side's rounds ("a" or "b") as one evidence: every
// sample, in the order taken, with the boots of every round. Nil when
// the side has no round.
func (r *ABResult) Pooled(side string) *Evidence {
	var ev *Evidence
	for _, round := range r.Rounds {
		if round.Side != side || round.Evidence == nil {
			continue
		}
		e := round.Evidence
		if ev == nil {
			ev = &Evidence{Commit: e.Commit, Release: e.Release, Signature: e.Signature, Build: e.Build, Metric: e.Metric, Kind: e.Kind}
		}
		ev.Boots = append(ev.Boots, e.Boots...)
		ev.Values = append(ev.Values, e.Values...)
		ev.Samples = append(ev.Samples, e.Samples...)
		ev.Seconds += e.Seconds
	}
	if ev != nil {
		ev.Reason = fmt.Sprintf("%d samples over %d rounds", len(ev.Values), len(ev.Boots))
	}
	return ev
}

// ReadAB reads kbisect ab's comparison from a state directory: its
// result when it is complete, else the plan (from plan.json) and the
// rounds measured so far. Nil when the directory holds none.
func ReadAB(stateDir string) (*ABResult, error) {
	return readAB(abDir(stateDir, ""))
}

func readAB(dir string) (*ABResult, error) {
	var res ABResult
	err := atomicfile.ReadJSON(filepath.Join(dir, "result.json"), &res)
	if err == nil {
		return &res, nil
	}
	if !os.IsNotExist(err) {
		return nil, err
	}
	if err := atomicfile.ReadJSON(filepath.Join(dir, "plan.json"), &res.Plan); err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "round-*.json"))
	sort.Strings(paths) // round-01-a, round-01-b, round-02-a …
	for _, path := range paths {
		var r ABRound
		if err := atomicfile.ReadJSON(path, &r); err != nil {
			return nil, err
		}
		res.Rounds = append(res.Rounds, &r)
	}
	return &res, nil
}

// WriteABPlan keeps the plan in the state directory before the first
// round, so a report can say what is being compared while it runs.
func WriteABPlan(stateDir string, plan ABPlan) error {
	return atomicfile.WriteJSON(filepath.Join(abDir(stateDir, plan.Name), "plan.json"), plan)
}

// CompareRounds compares B's rounds with A's on the metric: each round a
// boot, each boot its samples' median (noise.Side.Boots).
func CompareRounds(metric, aggregate string, confidence float64, plan ABPlan, rounds []*ABRound) (*noise.ABReport, error) {
	a := noise.Side{Name: plan.ALabel}
	b := noise.Side{Name: plan.BLabel}
	for _, r := range rounds {
		side := &a
		if r.Side == "b" {
			side = &b
		}
		side.Samples = append(side.Samples, r.Evidence.Samples...)
		// A round is a boot, or two when the lab dropped the first.
		var boots []int
		n := 0
		for _, b := range r.Evidence.Boots {
			if b.Samples > 0 {
				boots, n = append(boots, b.Samples), n+b.Samples
			}
		}
		if n != len(r.Evidence.Samples) {
			boots = []int{len(r.Evidence.Samples)}
		}
		side.Boots = append(side.Boots, boots...)
	}
	return noise.CompareAB(a, b, metric, aggregate, confidence)
}
