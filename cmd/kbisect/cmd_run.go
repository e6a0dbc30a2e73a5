package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/urfave/cli/v2"

	"kbisect/bisect"
	"kbisect/internal/atomicfile"
	"kbisect/testcmd"
	"kbisect/worktree"
)

// runOptions are the flags of kbisect run.
type runOptions struct {
	Args        []string // stray arguments: an error
	Repo        string
	Goods       []string
	Bad         string
	Exec        string
	Job         string
	Jobs        []string // several identical machines
	FirstParent bool
	State       string
	Replay      string
	JSON        bool
	// NoBuildAhead turns off building the next commits while one is
	// measured (run --job).
	NoBuildAhead bool
	// Verbose prints every command as it starts.
	Verbose bool
	// ReportDir is where the reports go instead of the job's report.dir
	// (nightly: each incident's own state directory).
	ReportDir string
	// FindGood walks back to a good release when the good endpoint
	// measures bad (run --job); FindGoodSet says the flag was given,
	// else the job or the terminal decides.
	FindGood, FindGoodSet bool
}

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "bisect a range to the first bad commit",
		UsageText: `kbisect run --good REV [--good REV…] --bad REV --job FILE [--first-parent]
       [--state DIR] [--json]
   kbisect run --good REV [--good REV…] --bad REV --exec CMD [--repo DIR]
       [--first-parent] [--state DIR] [--replay FILE] [--json]`,
		Description: `run drives a bisection to its end, unattended.

With --job FILE it bisects kernels on the job's lab machine. The revisions
are those of the job's build.tree, which is only read: every kernel is
built in kbisect's own build slots (kbisect build). First the endpoints
are measured (calibration): the bad one must be bad and the good one good
under the job's verdict rule, or the run stops as not reproduced (exit 4)
with both kernels' numbers; a ratio or auto threshold is set here. A good
endpoint that measures bad (the regression is older) is not the end with
--find-good (the default on a terminal; find_good in the job): the release
tags below it are tried, newest first with growing steps (v6.12.56,
v6.12.54, v6.12.50 …, then v6.12), each measured like any step, and the
bisection runs from the first good one to the oldest bad one; the report
says what the walk measured and cost. A bad endpoint that measures good is
never moved: the threshold, the workload or the machine is wrong. Then
each commit is built (the cache first), installed, booted with the job's
boot parameters and verified, measured as the verdict section says (more
samples while the rule is unsure), and judged. A commit that does not
build or boot is skipped (or bad: build.on_failure, boot.on_failure); an
unsure verdict after verdict.samples.max samples is a skip with its
reason; a failure of the lab (SSH, the host) is retried with backoff and
then stops the run, never a verdict. While the host measures a commit,
the two commits that can come next (after good, after bad) are built in
its build slot, incrementally (--no-build-ahead not to). Two commits that
build the same code
(kbuild's signature) share one measurement. Every commit's evidence (its
samples, the tools' raw output) goes to DIR/commits/ before its verdict is
recorded: killing kbisect and running the same command again resumes. The
default DIR is <git-dir of build.tree>/kbisect/run-<id>; a changed job file
does not resume another's verdicts. At the end: the first bad commit, the
tested commits with their numbers, and the last good and first bad kernels
compared.

With --exec CMD it is "git bisect run CMD": each candidate is checked out
(detached) in the work tree of --repo, and CMD runs at its top through
"sh -c" with KBISECT_COMMIT set to the commit. Its exit status is the
verdict: 0 good, 125 skip (cannot be tested), 1-127 except 125 bad,
anything else (or a signal) aborts the bisection. The first time CMD exits
126 or 127 (what a shell says for a command it cannot run or find), it is
run on a good revision too, and the same status there aborts: a broken
command must not mark every commit bad. The commits tested are the ones
git bisect would test, in the same order.

run refuses to start on a work tree with uncommitted changes to tracked
files, or in the middle of a git bisect, rebase or merge; untracked and
ignored files (a kernel .config, build outputs) are never touched. HEAD
and the branch are put back where they were however the run ends: found,
failed, Ctrl-C, SIGTERM or a dropped ssh session (SIGHUP). One run at a
time per work tree.

On a terminal CMD runs in kbisect's process group, as under git bisect
run: Ctrl-C stops both (no verdict is recorded for the interrupted test),
Ctrl-Z suspends both, and CMD may ask on the terminal (sudo, ssh). Without
a terminal (CI, cron, nohup) CMD gets a process group of its own, stopped
as a whole (SIGTERM, then SIGKILL after 5 s) when the run is interrupted.

Revisions are tags, branches, full or short hashes (an ambiguous short
hash is an error listing the matches), with ~N and ^N. A good revision that
is not an ancestor of the bad one is handled as git does: the merge bases
are tested first.

STATE AND RESUME
   Every verdict is appended to DIR/session.jsonl and synced before the next
   step. The default DIR is <git-dir>/kbisect/run-<id>, where <id> derives
   from the range, the command and the replayed log, so running the same
   command again resumes without repeating a test. After a crash, kill -9 or
   reboot, <git-dir>/kbisect/RUNNING remembers the run and the HEAD to put
   back, so the same command resumes even when a revision such as HEAD now
   names another commit; a test command the killed run left running is
   stopped first. DIR also holds git-bisect.log, a "git bisect log" that
   "git bisect replay" accepts, and result.json. --replay FILE starts from a
   log written by "git bisect log" (or by kbisect) and goes on from there.

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
			&cli.StringSliceFlag{Name: "job", Usage: "bisect kernels on the lab machine of this job file: build, boot, measure, decide (repeat for identical machines: they test the next commits at once)"},
			&cli.StringFlag{Name: "repo", Value: ".", Usage: "the git work tree to bisect in"},
			&cli.BoolFlag{Name: "first-parent", Usage: "follow only the first parent of merges, as git bisect --first-parent"},
			&cli.StringFlag{Name: "state", Usage: "state directory (default: <git-dir>/kbisect/run-<id>)"},
			&cli.StringFlag{Name: "replay", Usage: "start from the verdicts of a git bisect log file"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object on stdout at the end"},
			verboseFlag(),
			&cli.BoolFlag{Name: "no-build-ahead", Usage: "with --job: do not build the next commits while one is measured"},
			&cli.BoolFlag{Name: "find-good", Usage: "with --job: when the good endpoint measures bad, walk back along its release tags to one that measures good and bisect from there (default: on a terminal, or find_good.enabled)"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			opts := runOptions{
				Args:        c.Args().Slice(),
				Repo:        c.String("repo"),
				Goods:       c.StringSlice("good"),
				Bad:         c.String("bad"),
				Exec:        c.String("exec"),
				Jobs:        c.StringSlice("job"),
				FirstParent: c.Bool("first-parent"),
				State:       c.String("state"),
				Replay:      c.String("replay"),
				JSON:        c.Bool("json"),

				NoBuildAhead: c.Bool("no-build-ahead"),
				Verbose:      c.Bool("verbose"),
				FindGood:     c.Bool("find-good"),
				FindGoodSet:  c.IsSet("find-good"),
			}
			return runRun(c.Context, opts, c.App.Writer, c.App.ErrWriter)
		},
	}
}

func (o *runOptions) validate() error {
	if len(o.Jobs) > 0 {
		o.Job = o.Jobs[0]
	}
	switch {
	case len(o.Args) > 0:
		return usagef("run: unexpected argument %q (revisions go in --good and --bad, the test command in --exec)", o.Args[0])
	case o.Job != "" && o.Exec != "":
		return usagef("run: give --job or --exec, not both")
	case o.Job != "":
		return nil // checked by prepareJob
	case o.Exec == "":
		return usagef("run: --exec CMD is required (the test command, as for git bisect run)")
	case o.Replay != "" && (o.Bad != "" || len(o.Goods) > 0):
		return usagef("run: --replay takes the range from the log: drop --good and --bad")
	case o.Replay == "" && (o.Bad == "" || len(o.Goods) == 0):
		return usagef("run: --bad REV and at least one --good REV are required (or --replay FILE)")
	}
	return nil
}

func runRun(ctx context.Context, o runOptions, stdout, stderr io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.Job != "" {
		return runJob(ctx, o, stdout, stderr)
	}
	ctx = traceTo(ctx, o.Verbose, stderr)
	r := &execRun{o: o, stdout: stdout, stderr: stderr}
	defer r.close()
	if err := r.prepare(ctx); err != nil {
		if o.JSON {
			writeRunJSON(stdout, toJSON(bisect.Result{Kind: bisect.Aborted}, r.stateDir, err))
			return &reportedError{err}
		}
		return err
	}
	return r.bisect(ctx)
}

// execRun is one kbisect run --exec: the tree, its lock, the graph, the
// state directory and the session, from preparation to the end.
type execRun struct {
	o              runOptions
	stdout, stderr io.Writer

	tree     *worktree.Tree
	unlock   func()
	g        *bisect.Graph
	log      *bisect.StateLog
	stateDir string
	sess     *bisect.Session
	start    *bisect.Record
	// head is where HEAD goes back to: where this run found it, or where
	// the interrupted run it resumes found it.
	head worktree.Head
}

func (r *execRun) close() {
	if r.log != nil {
		r.log.Close()
	}
	if r.g != nil {
		r.g.Close()
	}
	if r.unlock != nil {
		r.unlock()
	}
}

// runningMarker names the file, in the git directory, that says a run has
// moved HEAD and not yet put it back: its state directory and the HEAD to
// restore. After a crash it is how the same command finds its state again,
// even though revisions such as HEAD now resolve elsewhere.
func (r *execRun) runningMarker() string {
	return filepath.Join(r.tree.GitDir, "kbisect", "RUNNING")
}

type runningMark struct {
	State      string `json:"state"`
	HeadBranch string `json:"head_branch"`
	HeadCommit string `json:"head_commit"`
}

func (m runningMark) head() worktree.Head {
	return worktree.Head{Branch: m.HeadBranch, Commit: m.HeadCommit}
}

func (r *execRun) prepare(ctx context.Context) error {
	o := r.o
	if err := o.validate(); err != nil {
		return err
	}
	tree, err := worktree.Open(ctx, o.Repo)
	if err != nil {
		return usagef("--repo %s: %v", o.Repo, err)
	}
	r.tree = tree
	if err := tree.RequireNoOperation(); err != nil {
		return err
	}
	if r.unlock, err = tree.Lock(); err != nil {
		return err
	}
	if r.g, err = bisect.OpenGraph(tree.Dir); err != nil {
		return err
	}
	if data, err := os.ReadFile(r.runningMarker()); err == nil {
		var mark runningMark
		if err := json.Unmarshal(data, &mark); err != nil || mark.State == "" {
			return fmt.Errorf("%s is not readable (%v): remove it, and check where HEAD is", r.runningMarker(), err)
		}
		if err := r.openInterrupted(ctx, mark); err != nil {
			return err
		}
	} else if err := r.openByRange(ctx); err != nil {
		return err
	}
	r.sess, r.start, err = bisect.Restore(r.g, r.log.Records())
	return err
}

// openInterrupted takes up the run a crash left in the middle, when this
// is the same command.
func (r *execRun) openInterrupted(ctx context.Context, mark runningMark) error {
	o := r.o
	abandon := fmt.Sprintf("go back with `git checkout %s` and remove %s", mark.head(), r.runningMarker())
	log, records, err := bisect.OpenState(mark.State)
	if err != nil {
		return err
	}
	r.log = log
	if len(records) == 0 {
		return fmt.Errorf("an interrupted kbisect run left HEAD detached, but its state %s is gone; %s", mark.State, abandon)
	}
	st := records[0]
	// Compare revisions as typed: after a crash HEAD (say) names the
	// commit under test, not the one the run started from.
	same := st.Meta["exec"] == o.Exec && st.Meta["replay"] == o.Replay && (o.State == "" || sameDir(o.State, mark.State))
	if o.Replay == "" {
		same = same && st.BadRev == o.Bad && slices.Equal(st.GoodRevs, o.Goods) && st.FirstParent == o.FirstParent
	} else {
		sum, err := fileSHA256(o.Replay)
		same = same && err == nil && sum == st.Meta["replay_sha256"] && (st.FirstParent || !o.FirstParent)
	}
	if !same {
		return usagef("an interrupted kbisect run left HEAD detached (state %s, started as: %s);\n"+
			"run that command again to resume it, or %s to start another", mark.State, describeStart(st), abandon)
	}
	r.stateDir, r.head = mark.State, mark.head()
	if files, err := r.tree.Changes(ctx); err == nil && len(files) > 0 {
		return fmt.Errorf("the interrupted run left changes in tracked files (the tree was clean when it started, so its test command made them): %s\n"+
			"discard them with `git reset --hard` and run the same command again to resume", strings.Join(files, " "))
	}
	if found, err := testcmd.StopLeftover(filepath.Join(mark.State, "test.pid"), 5*time.Second); err != nil {
		return err
	} else if found {
		fmt.Fprintln(r.stderr, "kbisect: stopped the test command the interrupted run left running")
	}
	fmt.Fprintf(r.stderr, "kbisect: resuming the interrupted run in %s (%d verdicts)\n", mark.State, countVerdicts(records))
	return nil
}

// openByRange resolves the range and opens its state directory: new, or
// one to resume.
func (r *execRun) openByRange(ctx context.Context) error {
	o := r.o
	start, replayMarks, err := resolveRange(r.g, o)
	if err != nil {
		return err
	}
	r.stateDir = o.State
	if r.stateDir == "" {
		r.stateDir = filepath.Join(r.tree.GitDir, "kbisect", "run-"+runID(start, o.Exec))
	}
	if r.stateDir, err = filepath.Abs(r.stateDir); err != nil {
		return err
	}
	log, records, err := bisect.OpenState(r.stateDir)
	if err != nil {
		return err
	}
	r.log = log
	if err := r.tree.RequireClean(ctx); err != nil {
		return err
	}
	if r.head, err = r.tree.Head(ctx); err != nil {
		return err
	}
	if len(records) > 0 {
		if err := sameRun(records[0], start, r.stateDir); err != nil {
			return err
		}
		fmt.Fprintf(r.stderr, "kbisect: resuming from %s (%d verdicts)\n", r.stateDir, countVerdicts(records))
		return nil
	}
	start.Meta["head_branch"], start.Meta["head_commit"], start.Meta["repo"] = r.head.Branch, r.head.Commit, r.tree.Dir
	initial := []bisect.Record{start}
	if len(replayMarks) > 0 && start.Meta["replay_range_on_start"] == "true" {
		// git checks the range when a replayed log starts with it, before
		// its verdicts: do the same, so they are read as git reads them.
		// (A log whose range comes as verdicts is checked after them.)
		sess, _, err := bisect.Restore(r.g, initial)
		if err != nil {
			return err
		}
		ok, err := sess.CheckAncestors()
		if err != nil {
			return err
		}
		if ok {
			initial = append(initial, bisect.Record{Event: bisect.EventAncestorsOK})
		}
		initial = append(initial, replayMarks...)
	}
	return log.Init(initial...)
}

func fileSHA256(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

func sameDir(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

func describeStart(st bisect.Record) string {
	var b strings.Builder
	b.WriteString("kbisect run")
	if st.Meta["replay"] != "" {
		fmt.Fprintf(&b, " --replay %s", st.Meta["replay"])
	} else {
		fmt.Fprintf(&b, " --bad %s", st.BadRev)
		for _, g := range st.GoodRevs {
			fmt.Fprintf(&b, " --good %s", g)
		}
	}
	if st.FirstParent {
		b.WriteString(" --first-parent")
	}
	fmt.Fprintf(&b, " --exec %s", sqQuoteShell(st.Meta["exec"]))
	return b.String()
}

func sqQuoteShell(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// bisect drives the session to its end, puts HEAD back and reports.
func (r *execRun) bisect(ctx context.Context) error {
	o, tree, g, head := r.o, r.tree, r.g, r.head
	mark, err := json.Marshal(runningMark{State: r.stateDir, HeadBranch: head.Branch, HeadCommit: head.Commit})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(r.runningMarker()), 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(r.runningMarker(), append(mark, '\n')); err != nil {
		return err
	}
	cmdOut := r.stdout
	if o.JSON {
		cmdOut = r.stderr
	}
	tester := &testcmd.Tester{Tree: tree, Command: r.start.Meta["exec"], Stdout: cmdOut, Stderr: r.stderr,
		PIDFile: filepath.Join(r.stateDir, "test.pid")}
	tester.Good = func() plumbing.Hash {
		// git verifies on its first good ref by name: the same order.
		if goods := r.sess.Goods(); len(goods) > 0 {
			return goods[0]
		}
		return plumbing.ZeroHash
	}
	res, runErr := bisect.Drive(ctx, r.sess, r.log, tester.Test, &textProgress{w: r.stderr, g: g})

	// Put HEAD back, also when interrupted (git commands outlive the
	// cancelled context), then drop the marker.
	var restoreErr error
	if head.Commit != "" {
		restoreErr = tree.Restore(ctx, head)
	}
	if restoreErr != nil {
		restoreErr = fmt.Errorf("could not put HEAD back on %s (run `git checkout %s` once the tree is as you want it): %w", head, head, restoreErr)
	} else if err := os.Remove(r.runningMarker()); err != nil && !os.IsNotExist(err) {
		restoreErr = err
	}
	if !g.HasCommitGraph() && g.CommitsRead() > 20000 {
		fmt.Fprintf(r.stderr, "hint: %d commits were read from their objects; `git commit-graph write --reachable` in %s makes this several times faster\n", g.CommitsRead(), tree.Dir)
	}
	out := toJSON(res, r.stateDir, runErr)
	if restoreErr != nil {
		if out.Error != "" {
			out.Error += "; "
		}
		out.Error += restoreErr.Error()
	}
	if err := saveReports(g, r.log, res, out); err != nil {
		fmt.Fprintf(r.stderr, "kbisect: %v\n", err)
	}
	if o.JSON {
		writeRunJSON(r.stdout, out)
	} else if runErr == nil {
		printResult(r.stdout, g, res)
	}
	if runErr != nil && restoreErr != nil {
		fmt.Fprintf(r.stderr, "kbisect: %v\n", restoreErr)
	}
	var err2 error
	switch {
	case runErr != nil:
		err2 = runErr
	case restoreErr != nil:
		err2 = restoreErr
	case res.Kind == bisect.Found:
		return nil
	case res.Kind == bisect.Inconclusive:
		return &resultError{exitInconclusive}
	case res.Kind == bisect.NotReproduced:
		return &resultError{exitNotReproduced}
	default:
		return &resultError{exitFailure}
	}
	if o.JSON {
		return &reportedError{err2}
	}
	return err2
}

// resolveRange turns the flags (or the replayed log) into the start record
// and the replayed verdicts.
func resolveRange(g *bisect.Graph, o runOptions) (bisect.Record, []bisect.Record, error) {
	start := bisect.Record{Event: bisect.EventStart, FirstParent: o.FirstParent, Meta: map[string]string{"exec": o.Exec}}
	badRev, goodRevs := o.Bad, o.Goods
	var marks []bisect.Record
	if o.Replay != "" {
		data, err := os.ReadFile(o.Replay)
		if err != nil {
			return start, nil, usagef("--replay: %v", err)
		}
		rep, err := bisect.ParseGitLog(o.Replay, bytes.NewReader(data))
		if err != nil {
			return start, nil, usagef("--replay: %v", err)
		}
		sum := sha256.Sum256(data)
		start.Meta["replay"], start.Meta["replay_sha256"] = o.Replay, hex.EncodeToString(sum[:])
		start.Meta["replay_range_on_start"] = strconv.FormatBool(rep.RangeOnStart)
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

// runID names the default state directory: the same range, command and
// replayed log give the same directory, so the same command resumes.
func runID(start bisect.Record, exec string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%v\x00%s\x00%s", start.Bad, strings.Join(start.Good, " "), start.FirstParent, exec, start.Meta["replay_sha256"])
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// sameRun checks that a state directory holds this bisection: the same
// range, the same command, and no new log to replay into it.
func sameRun(have, want bisect.Record, dir string) error {
	if have.Bad != want.Bad || !slices.Equal(have.Good, want.Good) || have.FirstParent != want.FirstParent {
		return usagef("state directory %s holds another bisection (bad %s, good %s, first-parent %v); give another --state, or remove it to start over",
			dir, have.Bad, strings.Join(have.Good, " "), have.FirstParent)
	}
	if have.Meta["exec"] != want.Meta["exec"] {
		return usagef("state directory %s holds verdicts of another test command (--exec %s); give another --state, or remove it to start over",
			dir, sqQuoteShell(have.Meta["exec"]))
	}
	if have.Meta["replay_sha256"] != want.Meta["replay_sha256"] {
		return usagef("state directory %s holds this range with other replayed verdicts; give another --state, or remove it to start over", dir)
	}
	return nil
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
