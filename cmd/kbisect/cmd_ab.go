package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/internal/atomicfile"
	"kbisect/internal/shell"
	"kbisect/lab"
	"kbisect/worktree"
)

type abOptions struct {
	Args            []string // stray arguments: an error
	Job             string
	A, B            string
	Base            string
	Revert, Patch   string
	Rounds, Samples int
	State           string
	JSON, Verbose   bool
}

// abDefaultRounds is the boots per side when neither the flags nor the
// job say: with 5 boots a side the test on the boots' medians can reach
// p < 0.01 (at 3 it never passes 0.1), and in simulation it found a 2×
// difference in 9 runs of 10 while calling identical kernels different in
// fewer than 1 in 20.
const abDefaultRounds = 5

func abCommand() *cli.Command {
	return &cli.Command{
		Name:  "ab",
		Usage: "measure two kernels in alternating rounds and say whether and how much they differ",
		UsageText: `kbisect ab --job FILE --a REV --b REV
   kbisect ab --job FILE --base REV --revert SHA     # B = base with SHA reverted
   kbisect ab --job FILE --base REV --patch FILE     # B = base with the patch applied
       [--rounds N] [--samples N] [--state DIR] [--json] [-v]`,
		Description: `ab builds both kernels (a revert or a patch is made in a scratch worktree:
your checkout is never touched) and measures them on the job's machine in
alternating rounds, A, B, A, B …, each round on a fresh boot, so whatever
drifts over the night weighs on both alike. Then it prints each kernel's
per-CPU table, the summary across the CPUs side by side, and the
comparison: B − A with its interval, the p-value and a one-line
conclusion. The test compares the boots (each its samples' median): the
samples of one boot share its luck.

Every round is kept in the state directory before the next starts: kill
ab and run the same command again to go on. kbisect report --state DIR
renders it at any time.

EXAMPLES
   kbisect ab --job configs/system-0.yaml --base v6.12.78 --revert 1a2b3c4d5e6f
   kbisect ab --job configs/system-0.yaml --a v6.12.57 --b v6.12.78 --rounds 8`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "job", Required: true, Usage: "job file of the lab machine"},
			&cli.StringFlag{Name: "a", Usage: "kernel A: a revision of build.tree"},
			&cli.StringFlag{Name: "b", Usage: "kernel B: a revision of build.tree"},
			&cli.StringFlag{Name: "base", Usage: "kernel A, and the base B is made from (with --revert or --patch)"},
			&cli.StringFlag{Name: "revert", Usage: "B is --base with this commit reverted"},
			&cli.StringFlag{Name: "patch", Usage: "B is --base with this patch applied (a git format-patch mail, or a diff)"},
			&cli.IntFlag{Name: "rounds", Usage: "boots per side (default: the job's verdict.boots, at least 5)"},
			&cli.IntFlag{Name: "samples", Usage: "samples per boot (default: the job's verdict.samples.min)"},
			&cli.StringFlag{Name: "state", Usage: "state directory (default: <git-dir>/kbisect/ab-<id>)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object on stdout at the end"},
			verboseFlag(),
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			o := abOptions{Args: c.Args().Slice(), Job: c.String("job"), A: c.String("a"), B: c.String("b"), Base: c.String("base"),
				Revert: c.String("revert"), Patch: c.String("patch"), Rounds: c.Int("rounds"), Samples: c.Int("samples"),
				State: c.String("state"), JSON: c.Bool("json"), Verbose: c.Bool("verbose")}
			return runAB(c.Context, o, c.App.Writer, c.App.ErrWriter)
		},
	}
}

func (o abOptions) validate() error {
	switch {
	case len(o.Args) > 0:
		return usagef("ab: unexpected argument %q (the kernels go in --a and --b, or --base with --revert or --patch)", o.Args[0])
	case o.Base == "" && (o.A == "" || o.B == ""):
		return usagef("ab: give --a REV and --b REV, or --base REV with --revert SHA or --patch FILE")
	case o.Base != "" && (o.A != "" || o.B != ""):
		return usagef("ab: --base makes B from A: drop --a and --b")
	case o.Base != "" && (o.Revert == "") == (o.Patch == ""):
		return usagef("ab --base: give --revert SHA or --patch FILE (one of them)")
	case o.Base == "" && (o.Revert != "" || o.Patch != ""):
		return usagef("ab: --revert and --patch need --base REV")
	case o.Rounds < 0 || o.Samples < 0:
		return usagef("ab: --rounds and --samples must be positive")
	}
	return nil
}

// abResultJSON is kbisect ab --json.
type abResultJSON struct {
	Result   string     `json:"result"` // different, no-difference, aborted
	A        abSideJSON `json:"a"`
	B        abSideJSON `json:"b"`
	Rounds   int        `json:"rounds"`
	Samples  int        `json:"samples"`
	Measured int        `json:"rounds_measured"` // rounds of both sides measured so far
	Command  string     `json:"command,omitempty"`
	Report   any        `json:"report,omitempty"`
	StateDir string     `json:"state_dir,omitempty"`
	Error    string     `json:"error,omitempty"`
}

type abSideJSON struct {
	Commit string `json:"commit"`
	Label  string `json:"label"`
}

func runAB(ctx context.Context, o abOptions, stdout, stderr io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	ctx = traceTo(ctx, o.Verbose, stderr)
	job, err := loadJob(o.Job, stderr)
	if err != nil {
		return err
	}
	if err := job.CheckEnv(nil); err != nil {
		return usagef("ab --job %v (set it, or run validate to see where it is used)", err)
	}
	plan, err := abPlan(ctx, job, o)
	if err != nil {
		return err
	}
	jobSum, err := fileSHA256(o.Job)
	if err != nil {
		return err
	}
	plan.Job = jobSum
	state := o.State
	if state == "" {
		wt, err := worktree.Open(ctx, string(job.Build.Tree))
		if err != nil {
			return fmt.Errorf("build.tree %s: %w", job.Build.Tree, err)
		}
		h := sha256.Sum256([]byte(strings.Join([]string{plan.A, plan.B, fmt.Sprint(plan.Rounds, plan.Samples), jobSum}, "\x00")))
		state = filepath.Join(wt.GitDir, "kbisect", "ab-"+hex.EncodeToString(h[:6]))
	}
	if state, err = filepath.Abs(state); err != nil {
		return err
	}
	if err := prepareABState(state, o.Job, plan); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "kbisect ab: A %s, B %s; %d rounds of %d samples each, alternating, each on a fresh boot\nkbisect ab: state in %s\n",
		plan.ALabel, plan.BLabel, plan.Rounds, plan.Samples, state)

	g, err := bisect.OpenGraph(string(job.Build.Tree))
	if err != nil {
		return usagef("build.tree %s: %v", job.Build.Tree, err)
	}
	defer g.Close()
	buildLog, err := os.OpenFile(filepath.Join(state, "build.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer buildLog.Close()
	bo := lab.BuildOptions(job, buildLog)
	if bo.Base, err = lab.BaseConfig(ctx, job, stderr); err != nil {
		return err
	}
	view := newJobView(stderr, g)
	view.labels = map[string]string{plan.A: "A", plan.B: "B"}
	p := &lab.Pipeline{Job: job, Build: bo, StateDir: state, Progress: view.Event}
	if job.Boot.Method == configs.BootQEMU {
		q, err := lab.NewQEMULab(job, state, func(s string) { fmt.Fprintln(stderr, s) })
		if err != nil {
			return err
		}
		defer q.Close()
		p.Boot = q.Boot
	}
	res, err := p.AB(ctx, plan)
	view.Done()
	out := abResultJSON{A: abSideJSON{plan.A, plan.ALabel}, B: abSideJSON{plan.B, plan.BLabel},
		Rounds: plan.Rounds, Samples: plan.Samples, StateDir: state, Command: plan.Command}
	if res != nil {
		out.Measured = len(res.Rounds)
	}
	if err != nil {
		out.Result, out.Error = "aborted", err.Error()
		if o.JSON {
			writeJSON(stdout, out)
			return &reportedError{err}
		}
		return err
	}
	out.Result = abVerdict(res)
	out.Report = res.Report
	if o.JSON {
		writeJSON(stdout, out)
		return nil
	}
	return writeABText(stdout, job, res)
}

// abPlan resolves the two kernels, making B from the base when asked.
func abPlan(ctx context.Context, job *configs.Job, o abOptions) (lab.ABPlan, error) {
	plan := lab.ABPlan{Rounds: o.Rounds, Samples: o.Samples}
	if plan.Rounds == 0 {
		plan.Rounds = max(job.Verdict.Boots, abDefaultRounds)
	}
	if plan.Samples == 0 {
		plan.Samples = max(job.Verdict.Samples.Min, 1)
	}
	plan.Command = abCommandLine(o, plan)
	resolve := func(flag, rev string) (string, error) {
		h, err := lab.ResolveCommit(ctx, job, rev)
		if err != nil {
			return "", usagef("ab --%s: %v", flag, err)
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
			return plan, usagef("ab: %v; make the change on a branch yourself and give it with --b", err)
		}
		return plan, err
	}
	return plan, nil
}

// abCommandLine is the command that makes (or resumes) the comparison.
func abCommandLine(o abOptions, plan lab.ABPlan) string {
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
func prepareABState(state, jobFile string, plan lab.ABPlan) error {
	have, err := lab.ReadAB(state)
	if err != nil {
		return err
	}
	if have != nil && (have.Plan.A != plan.A || have.Plan.B != plan.B || have.Plan.Rounds != plan.Rounds || have.Plan.Samples != plan.Samples) {
		return usagef("state directory %s holds another comparison (A %s, B %s, %d×%d); give another --state, or remove it to start over",
			state, have.Plan.ALabel, have.Plan.BLabel, have.Plan.Rounds, have.Plan.Samples)
	}
	if have != nil && have.Plan.Job != "" && have.Plan.Job != plan.Job {
		return usagef("state directory %s holds rounds measured with another version of %s (its copy is %s); give another --state, or remove it to start over",
			state, jobFile, filepath.Join(state, "job.yaml"))
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		return err
	}
	data, err := os.ReadFile(jobFile)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(state, "job.yaml"), data); err != nil {
		return err
	}
	return lab.WriteABPlan(state, plan)
}

func abVerdict(res *lab.ABResult) string {
	if res.Report != nil && res.Report.Comparison.Significant() {
		return "different"
	}
	return "no-difference"
}

func writeJSON(w io.Writer, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintf(w, "%s\n", b)
}
