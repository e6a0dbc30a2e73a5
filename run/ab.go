package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/internal/shell"
	"kbisect/internal/usage"
	"kbisect/lab"
	"kbisect/progress"
	"kbisect/report"
	"kbisect/worktree"
	"os"
	"path/filepath"
	"strings"
)

// ABOptions compare two kernels on a job's machine (kbisect ab): A and B
// as revisions, or B made from Base by reverting a commit or applying a
// patch.
type ABOptions struct {
	Job             string
	A, B            string
	Base            string
	Revert, Patch   string
	Rounds, Samples int
	State           string
	// Messages gets kbisect's own lines (the plan, the job's warnings).
	Messages io.Writer
	// Progress hears how the rounds go, A's and B's commits labelled.
	Progress progress.Sink
}

// ABDefaultRounds is the boots per side when neither the options nor the
// job say: with 5 boots a side the test on the boots' medians can reach
// p < 0.01 (at 3 it never passes 0.1), and in simulation it found a 2×
// difference in 9 runs of 10 while calling identical kernels different in
// fewer than 1 in 20.
const ABDefaultRounds = 5

// ABResult is how a comparison ended.
type ABResult struct {
	Job *configs.Job
	// JSON is the answer as kbisect ab --json prints it.
	JSON report.ABResultJSON
	// Comparison is the rounds and the statistics (nil when it stopped
	// before its first round).
	Comparison *lab.ABResult
}

// Validate says what is wrong with the two kernels the options name: A
// and B, or a base with one change (a usage error).
func (o ABOptions) Validate() error {
	switch {
	case o.Base == "" && (o.A == "" || o.B == ""):
		return usage.Errorf("ab: give --a REV and --b REV, or --base REV with --revert SHA or --patch FILE")
	case o.Base != "" && (o.A != "" || o.B != ""):
		return usage.Errorf("ab: --base makes B from A: drop --a and --b")
	case o.Base != "" && (o.Revert == "") == (o.Patch == ""):
		return usage.Errorf("ab --base: give --revert SHA or --patch FILE (one of them)")
	case o.Base == "" && (o.Revert != "" || o.Patch != ""):
		return usage.Errorf("ab: --revert and --patch need --base REV")
	case o.Rounds < 0 || o.Samples < 0:
		return usage.Errorf("ab: --rounds and --samples must be positive")
	}
	return nil
}

// AB measures A and B in alternating rounds, each on a fresh boot, and
// compares them; the same options resume from the state directory.
func AB(ctx context.Context, o ABOptions) (*ABResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Messages == nil {
		o.Messages = io.Discard
	}
	job, err := configs.Open(o.Job, o.Messages)
	if err != nil {
		return nil, err
	}
	if err := job.CheckEnv(nil); err != nil {
		return nil, usage.Errorf("ab --job %v (set it, or run validate to see where it is used)", err)
	}
	plan, err := abPlan(ctx, job, o)
	if err != nil {
		return nil, err
	}
	snap, err := snapshot(job)
	if err != nil {
		return nil, usage.Errorf("ab --job %s: %v", o.Job, err)
	}
	jobSum := snap.identity()
	plan.Job, plan.JobState = jobSum, stateFormat
	state := o.State
	if state == "" {
		wt, err := worktree.Open(ctx, string(job.Build.Tree))
		if err != nil {
			return nil, fmt.Errorf("build.tree %s: %w", job.Build.Tree, err)
		}
		h := sha256.Sum256([]byte(strings.Join([]string{plan.A, plan.B, fmt.Sprint(plan.Rounds, plan.Samples), jobSum}, "\x00")))
		state = filepath.Join(wt.GitDir, "kbisect", "ab-"+hex.EncodeToString(h[:6]))
	}
	if state, err = filepath.Abs(state); err != nil {
		return nil, err
	}
	ev := newEvents(o.Progress)
	have, err := lab.ReadAB(state)
	if err != nil {
		return nil, err
	}
	if _, err := preflight(ctx, []*configs.Job{job}, state, have != nil, false, ev.line); err != nil {
		return nil, err
	}
	unlock, err := bisect.LockState(state)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := prepareABState(state, o.Job, snap, plan, o.Messages); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Messages, "kbisect ab: A %s, B %s; %d rounds of %d samples each, alternating, each on a fresh boot\nkbisect ab: state in %s\n",
		plan.ALabel, plan.BLabel, plan.Rounds, plan.Samples, state)

	g, err := bisect.OpenGraph(ctx, string(job.Build.Tree))
	if err != nil {
		return nil, usage.Errorf("build.tree %s: %v", job.Build.Tree, err)
	}
	defer g.Close()
	buildLog, err := os.OpenFile(filepath.Join(state, "build.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer buildLog.Close()
	bo := lab.BuildOptions(job, buildLog)
	if bo.Base, err = lab.BaseConfig(ctx, job, o.Messages); err != nil {
		return nil, err
	}
	ev.g, ev.ctx, ev.labels = g, ctx, map[string]string{plan.A: "A", plan.B: "B"}
	p := &lab.Pipeline{Job: job, Build: bo, StateDir: state, Progress: ev, BaseFile: baseFile(state, "")}
	if job.Boot.Method == configs.BootQEMU {
		q, err := lab.NewQEMULab(job, state, ev)
		if err != nil {
			return nil, err
		}
		defer q.Close()
		p.Boot = q.Boot
	}
	res, err := p.AB(ctx, plan)
	ev.done()
	out := &ABResult{Job: job, JSON: report.ABResultJSONOf(plan, state), Comparison: res}
	if res != nil {
		out.JSON.Measured = len(res.Rounds)
	}
	if err != nil {
		out.JSON.Result, out.JSON.Error = "aborted", err.Error()
		return out, err
	}
	out.JSON.Result = report.ABVerdict(res)
	out.JSON.Report = res.Report
	return out, nil
}

// abPlan resolves the two kernels, making B from the base when asked.
func abPlan(ctx context.Context, job *configs.Job, o ABOptions) (lab.ABPlan, error) {
	plan := lab.ABPlan{Rounds: o.Rounds, Samples: o.Samples}
	if plan.Rounds == 0 {
		plan.Rounds = max(job.Verdict.Boots, ABDefaultRounds)
	}
	if plan.Samples == 0 {
		plan.Samples = max(job.Verdict.Samples.Min, 1)
	}
	plan.Command = abCommandLine(o, plan)
	resolve := func(flag, rev string) (string, error) {
		h, err := lab.ResolveCommit(ctx, job, rev)
		if err != nil {
			return "", usage.Errorf("ab --%s: %v", flag, err)
		}
		return h, nil
	}
	var err error
	if o.Base == "" {
		if plan.A, err = resolve("a", o.A); err != nil {
			return plan, err
		}
		if plan.B, err = resolve("b", o.B); err != nil {
			return plan, err
		}
		plan.ALabel, plan.BLabel = revLabel(o.A, plan.A), revLabel(o.B, plan.B)
		return plan, nil
	}
	if plan.A, err = resolve("base", o.Base); err != nil {
		return plan, err
	}
	plan.ALabel = revLabel(o.Base, plan.A)
	change := worktree.Change{Patch: o.Patch}
	if o.Revert != "" {
		r, err := resolve("revert", o.Revert)
		if err != nil {
			return plan, err
		}
		change.Revert = r
		plan.BLabel = fmt.Sprintf("%s with %s reverted", plan.ALabel, r[:12])
	} else {
		plan.BLabel = fmt.Sprintf("%s with %s applied", plan.ALabel, filepath.Base(o.Patch))
	}
	if plan.B, err = worktree.Derive(ctx, string(job.Build.Tree), plan.A, change); err != nil {
		var ce *worktree.ConflictError
		if errors.As(err, &ce) {
			return plan, usage.Errorf("ab: %v; make the change on a branch yourself and give it with --b", err)
		}
		return plan, err
	}
	return plan, nil
}

// abCommandLine is the command that makes (or resumes) the comparison.
func abCommandLine(o ABOptions, plan lab.ABPlan) string {
	args := []string{"kbisect", "ab", "--job", o.Job}
	for _, f := range [][2]string{{"--a", o.A}, {"--b", o.B}, {"--base", o.Base}, {"--revert", o.Revert}, {"--patch", o.Patch}} {
		if f[1] != "" {
			args = append(args, f[0], f[1])
		}
	}
	args = append(args, "--rounds", fmt.Sprint(plan.Rounds), "--samples", fmt.Sprint(plan.Samples))
	return shell.Join(args...)
}

// revLabel names a revision as the user gave it, with its commit when
// that is not already what they typed.
func revLabel(rev, hash string) string {
	if strings.HasPrefix(hash, rev) {
		return hash[:12]
	}
	return fmt.Sprintf("%s (%s)", rev, hash[:12])
}

// prepareABState makes the state directory, or checks that it holds this
// comparison.
func prepareABState(state, jobFile string, snap *jobSnapshot, plan lab.ABPlan, msg io.Writer) error {
	have, err := lab.ReadAB(state)
	if err != nil {
		return err
	}
	if have != nil && (have.Plan.A != plan.A || have.Plan.B != plan.B || have.Plan.Rounds != plan.Rounds || have.Plan.Samples != plan.Samples) {
		return usage.Errorf("state directory %s holds another comparison (A %s, B %s, %d×%d); give another --state, or remove it to start over",
			state, have.Plan.ALabel, have.Plan.BLabel, have.Plan.Rounds, have.Plan.Samples)
	}
	if have != nil {
		if have.Plan.JobState == stateFormat {
			if err := checkSameJobs(state, []string{jobFile}, []*jobSnapshot{snap}, msg); err != nil {
				return err
			}
		} else if sum, err := FileSHA256(jobFile); err != nil {
			return err
		} else if have.Plan.Job != "" && have.Plan.Job != sum {
			return usage.Errorf("state directory %s holds rounds measured with another version of %s (its copy is %s); give another --state, or remove it to start over",
				state, jobFile, filepath.Join(state, "job.yaml"))
		}
		// The state's job stays the one its rounds were measured with.
		plan.Job, plan.JobState = have.Plan.Job, have.Plan.JobState
		return lab.WriteABPlan(state, plan)
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		return err
	}
	if err := snap.save(state, "job.yaml"); err != nil {
		return err
	}
	return lab.WriteABPlan(state, plan)
}
