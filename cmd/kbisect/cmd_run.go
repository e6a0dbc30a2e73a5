package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/urfave/cli/v2"

	"kbisect/bisect"
	"kbisect/lab"
	"kbisect/worktree"
)

// runOptions are the flags of kbisect run.
type runOptions struct {
	Repo        string
	Goods       []string
	Bad         string
	Exec        string
	Job         string
	FirstParent bool
	State       string
	Replay      string
	JSON        bool
}

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "bisect a range to the first bad commit",
		UsageText: `kbisect run --good REV [--good REV…] --bad REV --exec CMD [--repo DIR]
       [--first-parent] [--state DIR] [--replay FILE] [--json]`,
		Description: `run drives a bisection to its end, unattended.

With --exec CMD it is "git bisect run CMD": each candidate is checked out
(detached) in the work tree of --repo, and CMD runs at its top through
"sh -c" with KBISECT_COMMIT set to the commit. Its exit status is the
verdict: 0 good, 125 skip (cannot be tested), 1-127 except 125 bad,
anything else (or a signal) aborts the bisection. When the first run exits
126 or 127 (what a shell says for a command it cannot run or find), CMD is
run on a good revision too, and the same status there aborts: a broken
command must not mark every commit bad. The commits tested are the ones
git bisect would test, in the same order.

run refuses to start on a work tree with uncommitted changes to tracked
files; untracked and ignored files (a kernel .config, build outputs) are
never touched. HEAD and the branch are put back where they were however the
run ends: found, failed, or interrupted with Ctrl-C.

Revisions are tags, branches, full or short hashes (an ambiguous short
hash is an error listing the matches), with ~N and ^N. A good revision that
is not an ancestor of the bad one is handled as git does: the merge bases
are tested first.

STATE AND RESUME
   Every verdict is appended to DIR/session.jsonl and synced before the next
   step. The default DIR is <git-dir>/kbisect/run-<id>, where <id> derives
   from the range and the command, so running the same command again (after
   a crash, kill -9 or reboot) resumes without repeating a test. DIR also
   holds git-bisect.log, a "git bisect log" that "git bisect replay"
   accepts, and result.json. --replay FILE starts from a log written by
   "git bisect log" (or by kbisect) and goes on from there.

OUTPUT
   Progress goes to stderr, the test command's output to stdout (stderr with
   --json). At the end: "<sha> is the first bad commit" and the commit, as
   git prints it, or with --json one object:
   {"result": "found", "first_bad": "<sha>", "candidates": ["<sha>"],
    "steps": 12, "tested": [{"commit": "<sha>", "verdict": "bad",
    "seconds": 1.2}], "state_dir": "…"}
   result is found, inconclusive (skips leave several candidates, all
   listed), not-reproduced or aborted.

EXIT STATUS
   0 found, 1 failure, 2 usage error, 3 inconclusive, 4 not reproduced,
   130 interrupted.

EXAMPLES
   # Which commit broke the build of this tool?
   kbisect run --repo . --good v1.2 --bad main --exec 'make >/dev/null'

   # Kernel: skip commits that do not build, judge the rest by a script.
   kbisect run --repo ~/linux --good v6.12.57 --bad v6.12.78 --first-parent \
       --exec 'make -j"$(nproc)" bzImage >/dev/null 2>&1 || exit 125; ./noise-check'

   # Go on from a bisection started by hand with git.
   git bisect log > my.log && git bisect reset
   kbisect run --repo ~/linux --replay my.log --exec ./noise-check`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "good", Usage: "a revision known to be good (repeatable)"},
			&cli.StringFlag{Name: "bad", Usage: "a revision known to be bad"},
			&cli.StringFlag{Name: "exec", Usage: "test each candidate with this shell command, as git bisect run"},
			&cli.StringFlag{Name: "job", Usage: "job file of the lab machine (build, boot, measure)"},
			&cli.StringFlag{Name: "repo", Value: ".", Usage: "the git work tree to bisect in"},
			&cli.BoolFlag{Name: "first-parent", Usage: "follow only the first parent of merges, as git bisect --first-parent"},
			&cli.StringFlag{Name: "state", Usage: "state directory (default: <git-dir>/kbisect/run-<id>)"},
			&cli.StringFlag{Name: "replay", Usage: "start from the verdicts of a git bisect log file"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object on stdout at the end"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.Args().Len() > 0 {
				return usagef("run: unexpected argument %q (revisions go in --good and --bad)", c.Args().First())
			}
			opts := runOptions{
				Repo:        c.String("repo"),
				Goods:       c.StringSlice("good"),
				Bad:         c.String("bad"),
				Exec:        c.String("exec"),
				Job:         c.String("job"),
				FirstParent: c.Bool("first-parent"),
				State:       c.String("state"),
				Replay:      c.String("replay"),
				JSON:        c.Bool("json"),
			}
			return runRun(c.Context, opts, c.App.Writer, c.App.ErrWriter)
		},
	}
}

func (o *runOptions) validate() error {
	switch {
	case o.Job != "" && o.Exec != "":
		return usagef("run: give --job or --exec, not both")
	case o.Job != "":
		return usagef("run --job: building, booting and measuring kernels from a job file is not available yet; use --exec CMD for now")
	case o.Exec == "":
		return usagef("run: --exec CMD is required (the test command, as for git bisect run)")
	case o.Replay == "" && (o.Bad == "" || len(o.Goods) == 0):
		return usagef("run: --bad REV and at least one --good REV are required (or --replay FILE)")
	}
	return nil
}

// runJSON is the --json answer, as in the design's contract.
type runJSON struct {
	Result     string       `json:"result"`
	FirstBad   string       `json:"first_bad,omitempty"`
	Candidates []string     `json:"candidates"`
	Steps      int          `json:"steps"`
	Tested     []testedJSON `json:"tested"`
	StateDir   string       `json:"state_dir"`
	Reason     string       `json:"reason,omitempty"`
	Warnings   []string     `json:"warnings,omitempty"`
	Error      string       `json:"error,omitempty"`
}

type testedJSON struct {
	Commit  string  `json:"commit"`
	Verdict string  `json:"verdict"`
	Seconds float64 `json:"seconds"`
	Source  string  `json:"source,omitempty"`
}

func runRun(ctx context.Context, o runOptions, stdout, stderr io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	tree, err := worktree.Open(ctx, o.Repo)
	if err != nil {
		return usagef("--repo %s: %v", o.Repo, err)
	}
	g, err := bisect.OpenGraph(tree.Dir)
	if err != nil {
		return err
	}
	defer g.Close()

	start, replayMarks, err := resolveRange(g, o)
	if err != nil {
		return err
	}
	stateDir := o.State
	if stateDir == "" {
		stateDir = filepath.Join(tree.GitDir, "kbisect", "run-"+runID(start, o.Exec))
	}
	log, records, err := bisect.OpenState(stateDir)
	if err != nil {
		return err
	}
	defer log.Close()

	if err := tree.RequireNoOperation(); err != nil {
		return err
	}
	unlock, err := tree.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := tree.RequireClean(ctx); err != nil {
		return err
	}
	if len(records) == 0 {
		head, err := tree.Head(ctx)
		if err != nil {
			return err
		}
		start.Meta = map[string]string{"head_branch": head.Branch, "head_commit": head.Commit, "exec": o.Exec, "repo": tree.Dir}
		if err := log.Append(start); err != nil {
			return err
		}
		for _, m := range replayMarks {
			if err := log.Append(m); err != nil {
				return err
			}
		}
	} else if err := sameRange(records[0], start, stateDir); err != nil {
		return err
	} else {
		fmt.Fprintf(stderr, "kbisect: resuming from %s (%d verdicts)\n", stateDir, countVerdicts(records))
	}
	sess, first, err := bisect.Restore(g, log.Records())
	if err != nil {
		return err
	}
	cmdOut := stdout
	if o.JSON {
		cmdOut = stderr
	}
	tester := &lab.ExecTester{Tree: tree, Command: o.Exec, Stdout: cmdOut, Stderr: stderr}
	tester.Good = func() plumbing.Hash {
		// git verifies on its first good ref by name: the same order.
		if goods := sess.Goods(); len(goods) > 0 {
			return goods[0]
		}
		return plumbing.ZeroHash
	}
	prog := &textProgress{w: stderr, g: g}

	res, runErr := bisect.Drive(ctx, sess, log, tester.Test, prog)

	// Put HEAD back even when interrupted: the context may be cancelled.
	restoreCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	head := worktree.Head{Branch: first.Meta["head_branch"], Commit: first.Meta["head_commit"]}
	if head.Commit != "" {
		if err := tree.Restore(restoreCtx, head); err != nil {
			fmt.Fprintf(stderr, "kbisect: could not put HEAD back to %s: %v\n", head, err)
			if runErr == nil {
				runErr = err
			}
		}
	}
	if !g.HasCommitGraph() && g.CommitsRead() > 20000 {
		fmt.Fprintf(stderr, "hint: %d commits were read from their objects; `git commit-graph write --reachable` in %s makes this several times faster\n", g.CommitsRead(), tree.Dir)
	}
	if err := saveReports(g, log, res, runErr); err != nil && runErr == nil {
		runErr = err
	}

	if o.JSON {
		writeRunJSON(stdout, res, stateDir, runErr)
	} else if runErr == nil {
		printResult(stdout, g, res)
	}
	if runErr != nil {
		if o.JSON && ctx.Err() == nil {
			return &resultError{exitFailure}
		}
		return runErr
	}
	switch res.Kind {
	case bisect.Found:
		return nil
	case bisect.Inconclusive:
		return &resultError{exitInconclusive}
	case bisect.NotReproduced:
		return &resultError{exitNotReproduced}
	}
	return &resultError{exitFailure}
}

// resolveRange turns the flags (or the replayed log) into the start record
// and the replayed verdicts.
func resolveRange(g *bisect.Graph, o runOptions) (bisect.Record, []bisect.Record, error) {
	start := bisect.Record{Event: bisect.EventStart, FirstParent: o.FirstParent}
	badRev, goodRevs := o.Bad, o.Goods
	var marks []bisect.Record
	if o.Replay != "" {
		f, err := os.Open(o.Replay)
		if err != nil {
			return start, nil, usagef("--replay: %v", err)
		}
		rep, err := bisect.ParseGitLog(o.Replay, f)
		f.Close()
		if err != nil {
			return start, nil, usagef("--replay: %v", err)
		}
		if badRev != "" || len(goodRevs) > 0 {
			return start, nil, usagef("--replay takes the range from the log: drop --good and --bad")
		}
		badRev, goodRevs = rep.Bad, rep.Goods
		start.FirstParent = start.FirstParent || rep.FirstParent
		for _, m := range rep.Marks {
			h, err := g.Resolve(m.Rev)
			if err != nil {
				return start, nil, usagef("%s:%d: %v", o.Replay, m.Line, err)
			}
			marks = append(marks, bisect.Record{Event: bisect.EventVerdict, Commit: h.String(), Verdict: m.Verdict.String(), Source: "replay"})
		}
	}
	bad, err := g.Resolve(badRev)
	if err != nil {
		return start, nil, usagef("--bad %s: %v", badRev, err)
	}
	start.Bad, start.BadRev = bad.String(), badRev
	var goods []string
	for _, rev := range goodRevs {
		h, err := g.Resolve(rev)
		if err != nil {
			return start, nil, usagef("--good %s: %v", rev, err)
		}
		if !slices.Contains(goods, h.String()) {
			goods = append(goods, h.String())
		}
	}
	slices.Sort(goods)
	start.Good, start.GoodRevs = goods, goodRevs
	return start, marks, nil
}

func runID(start bisect.Record, exec string) string {
	h := sha1.New()
	fmt.Fprintf(h, "%s\x00%s\x00%v\x00%s", start.Bad, strings.Join(start.Good, " "), start.FirstParent, exec)
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func sameRange(have, want bisect.Record, dir string) error {
	if have.Bad == want.Bad && slices.Equal(have.Good, want.Good) && have.FirstParent == want.FirstParent {
		return nil
	}
	return usagef("state directory %s holds another bisection (bad %s, good %s, first-parent %v); give another --state, or remove it to start over",
		dir, have.Bad, strings.Join(have.Good, " "), have.FirstParent)
}

func countVerdicts(records []bisect.Record) int {
	n := 0
	for _, r := range records {
		if r.Event == bisect.EventVerdict {
			n++
		}
	}
	return n
}

// saveReports writes git-bisect.log and result.json into the state dir.
func saveReports(g *bisect.Graph, log *bisect.StateLog, res bisect.Result, runErr error) error {
	dir := log.Dir()
	text, err := bisect.GitLog(g, log.Records(), res.Final)
	if err != nil {
		return err
	}
	if err := bisect.WriteFileAtomic(filepath.Join(dir, "git-bisect.log"), []byte(text)); err != nil {
		return err
	}
	b, err := json.MarshalIndent(toJSON(res, dir, runErr), "", "  ")
	if err != nil {
		return err
	}
	return bisect.WriteFileAtomic(filepath.Join(dir, "result.json"), append(b, '\n'))
}

func toJSON(res bisect.Result, dir string, runErr error) runJSON {
	out := runJSON{Result: string(res.Kind), Candidates: []string{}, Tested: []testedJSON{}, StateDir: dir, Reason: res.Reason, Warnings: res.Warnings}
	if res.Kind == bisect.Found {
		out.FirstBad = res.FirstBad.String()
	}
	for _, c := range res.Candidates {
		out.Candidates = append(out.Candidates, c.String())
	}
	for _, t := range res.Tested {
		out.Tested = append(out.Tested, testedJSON{Commit: t.Commit.String(), Verdict: t.Verdict.String(), Seconds: t.Seconds, Source: t.Source})
		if t.Source != "replay" {
			out.Steps++
		}
	}
	if runErr != nil {
		out.Result = string(bisect.Aborted)
		out.Error = runErr.Error()
	}
	return out
}

func writeRunJSON(w io.Writer, res bisect.Result, dir string, runErr error) {
	b, _ := json.MarshalIndent(toJSON(res, dir, runErr), "", "  ")
	fmt.Fprintf(w, "%s\n", b)
}

func printResult(w io.Writer, g *bisect.Graph, res bisect.Result) {
	for _, msg := range res.Warnings {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
	switch res.Kind {
	case bisect.Found:
		fmt.Fprintf(w, "%s is the first bad commit\n", res.FirstBad)
		if info, err := g.Info(res.FirstBad); err == nil {
			fmt.Fprintf(w, "commit %s\nAuthor: %s\nDate:   %s\n\n    %s\n", info.Hash, info.Author, info.Date, info.Subject)
		}
	case bisect.Inconclusive:
		fmt.Fprintln(w, "There are only 'skip'ped commits left to test.")
		fmt.Fprintln(w, "The first bad commit could be any of:")
		for _, c := range res.Candidates {
			subject := ""
			if info, err := g.Info(c); err == nil {
				subject = info.Subject
			}
			fmt.Fprintf(w, "%s %s\n", c, subject)
		}
		fmt.Fprintln(w, "We cannot bisect more!")
	case bisect.NotReproduced:
		fmt.Fprintf(w, "not reproduced: %s\n", res.Reason)
	}
}

// textProgress prints plain progress lines, as git bisect does.
type textProgress struct {
	w io.Writer
	g *bisect.Graph
}

func (p *textProgress) Testing(step bisect.Step) {
	if step.MergeBase {
		fmt.Fprintln(p.w, "Bisecting: a merge base must be tested")
	} else {
		fmt.Fprintf(p.w, "Bisecting: %d revision%s left to test after this (roughly %d step%s)\n",
			step.Left, plural(step.Left), step.Estimate, plural(step.Estimate))
	}
	subject := ""
	if info, err := p.g.Info(step.Commit); err == nil {
		subject = info.Subject
	}
	fmt.Fprintf(p.w, "[%s] %s\n", step.Commit, subject)
}

func (p *textProgress) Tested(commit plumbing.Hash, out bisect.Outcome, elapsed time.Duration) {
	fmt.Fprintf(p.w, "%s is %s (%s, %.1fs)\n", commit.String()[:12], out.Verdict, out.Note, elapsed.Seconds())
}

func (p *textProgress) Warn(msg string) { fmt.Fprintf(p.w, "warning: %s\n", msg) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
