package run

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"kbisect/bisect"
	"kbisect/internal/atomicfile"
	"kbisect/internal/usage"
	"kbisect/report"
	"kbisect/testcmd"
	"kbisect/worktree"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// Exec bisects with a test command, as git bisect run does, or resumes
// the run its state directory (or an interrupted run's marker) holds. The
// work tree's HEAD is put back however it ends.
func Exec(ctx context.Context, o ExecOptions) (*Result, error) {
	for _, w := range []*io.Writer{&o.Stdout, &o.Stderr, &o.Messages} {
		if *w == nil {
			*w = io.Discard
		}
	}
	r := &execRun{o: o, ev: newEvents(o.Progress)}
	defer r.close()
	if err := r.prepare(ctx); err != nil {
		return aborted(r.stateDir, err), err
	}
	res, err := r.bisect(ctx)
	if res.Graph != nil {
		r.g = nil // the result's now
	}
	return res, err
}

// execRun is one kbisect run --exec: the tree, its lock, the graph, the
// state directory and the session, from preparation to the end.
type execRun struct {
	o  ExecOptions
	ev *events

	tree   *worktree.Tree
	unlock func()
	bisection
	start *bisect.Record
	// head is where HEAD goes back to: where this run found it, or where
	// the interrupted run it resumes found it.
	head worktree.Head
}

func (r *execRun) close() {
	r.bisection.close()
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
	switch {
	case o.Exec == "":
		return usage.Errorf("run: --exec CMD is required (the test command, as for git bisect run)")
	case o.Replay != "" && (o.Bad != "" || len(o.Goods) > 0):
		return usage.Errorf("run: --replay takes the range from the log: drop --good and --bad")
	case o.Replay == "" && (o.Bad == "" || len(o.Goods) == 0):
		return usage.Errorf("run: --bad REV and at least one --good REV are required (or --replay FILE)")
	case o.Confidence != 0 && !(o.Confidence > 0.5 && o.Confidence < 1):
		return usage.Errorf("run: --confidence %g: give a probability between 0.5 and 1 (e.g. 0.99)", o.Confidence)
	case o.Confidence != 0 && o.Replay != "":
		return usage.Errorf("run: --confidence bisects from --good and --bad; --replay continues git's exact bisection")
	case o.MaxRuns < 0 || (o.MaxRuns > 0 && o.Confidence == 0):
		return usage.Errorf("run: --max-runs N is a budget of runs for --confidence: a positive number, with --confidence")
	}
	tree, err := worktree.Open(ctx, o.Repo)
	if err != nil {
		return usage.Errorf("--repo %s: %v", o.Repo, err)
	}
	r.tree = tree
	if err := tree.RequireNoOperation(); err != nil {
		return err
	}
	if r.unlock, err = tree.Lock(); err != nil {
		return err
	}
	if r.g, err = bisect.OpenGraph(ctx, tree.Dir); err != nil {
		return err
	}
	r.ev.g, r.ev.ctx = r.g, ctx
	if data, err := os.ReadFile(r.runningMarker()); err == nil {
		var mark runningMark
		if err := json.Unmarshal(data, &mark); err != nil || mark.State == "" {
			return fmt.Errorf("%s is not readable (%v): remove it, and check where HEAD is", r.runningMarker(), err)
		}
		moved, err := r.headTakenBack(ctx, mark)
		switch {
		case err != nil:
			return err
		case moved:
			err = r.openByRange(ctx)
		default:
			err = r.openInterrupted(ctx, mark)
		}
		if err != nil {
			return err
		}
	} else if err := r.openByRange(ctx); err != nil {
		return err
	}
	r.sess, r.start, err = bisect.Restore(r.g, r.log.Records())
	return err
}

// headTakenBack says whether the user put HEAD back on a branch since a
// run was interrupted (which leaves it detached at a commit under test):
// the tree is theirs again, so the marker goes and the run's state stays,
// resumed by its range like any other.
func (r *execRun) headTakenBack(ctx context.Context, mark runningMark) (bool, error) {
	h, err := r.tree.Head(ctx)
	if err != nil || h.Branch == "" {
		return false, err
	}
	if _, err := testcmd.StopLeftover(filepath.Join(mark.State, "test.pid"), 5*time.Second); err != nil {
		return false, err
	}
	if err := os.Remove(r.runningMarker()); err != nil && !os.IsNotExist(err) {
		return false, err
	}
	fmt.Fprintf(r.o.Messages, "kbisect: HEAD is on %s again since a run was interrupted; its verdicts stay in %s, resumed by the same range\n",
		strings.TrimPrefix(h.Branch, "refs/heads/"), mark.State)
	return true, nil
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
	same := st.Meta["exec"] == o.Exec && st.Meta["replay"] == o.Replay && (o.State == "" || sameDir(o.State, mark.State)) &&
		st.Meta["flaky"] == flakyMeta(o.Confidence)
	if o.Replay == "" {
		same = same && st.BadRev == o.Bad && slices.Equal(st.GoodRevs, o.Goods) && st.FirstParent == o.FirstParent
	} else {
		sum, err := FileSHA256(o.Replay)
		same = same && err == nil && sum == st.Meta["replay_sha256"] && (st.FirstParent || !o.FirstParent)
	}
	if !same {
		return usage.Errorf("an interrupted kbisect run left HEAD detached (state %s, started as: %s);\n"+
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
		fmt.Fprintln(r.o.Messages, "kbisect: stopped the test command the interrupted run left running")
	}
	fmt.Fprintf(r.o.Messages, "kbisect: resuming the interrupted run in %s (%d verdicts)\n", mark.State, countVerdicts(records))
	return nil
}

// openByRange resolves the range and opens its state directory: new, or
// one to resume.
func (r *execRun) openByRange(ctx context.Context) error {
	o := r.o
	start, replayMarks, err := resolveRange(r.g, o.Range, o.Exec)
	if err != nil {
		return err
	}
	if o.Confidence != 0 {
		start.Meta["flaky"], start.Meta["confidence"] = flakyMeta(o.Confidence), strconv.FormatFloat(o.Confidence, 'g', -1, 64)
	}
	dir := o.State
	if dir == "" {
		dir = filepath.Join(r.tree.GitDir, "kbisect", "run-"+runID(start, o.Exec))
	}
	records, err := r.openState(dir)
	if err != nil {
		return err
	}
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
		fmt.Fprintf(r.o.Messages, "kbisect: resuming from %s (%d verdicts)\n", r.stateDir, countVerdicts(records))
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
	return r.log.Init(initial...)
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
	if st.Meta["confidence"] != "" {
		fmt.Fprintf(&b, " --confidence %s", st.Meta["confidence"])
	}
	fmt.Fprintf(&b, " --exec %s", sqQuoteShell(st.Meta["exec"]))
	return b.String()
}

func sqQuoteShell(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// bisect drives the session to its end, puts HEAD back and reports.
func (r *execRun) bisect(ctx context.Context) (*Result, error) {
	o, tree, g, head := r.o, r.tree, r.g, r.head
	mark, err := json.Marshal(runningMark{State: r.stateDir, HeadBranch: head.Branch, HeadCommit: head.Commit})
	if err != nil {
		return aborted(r.stateDir, err), err
	}
	if err := os.MkdirAll(filepath.Dir(r.runningMarker()), 0o755); err != nil {
		return aborted(r.stateDir, err), err
	}
	if err := atomicfile.WriteFile(r.runningMarker(), append(mark, '\n')); err != nil {
		return aborted(r.stateDir, err), err
	}
	tester := &testcmd.Tester{Tree: tree, Command: r.start.Meta["exec"], Stdout: o.Stdout, Stderr: o.Stderr,
		PIDFile: filepath.Join(r.stateDir, "test.pid")}
	tester.Good = func() plumbing.Hash {
		// git verifies on its first good ref by name: the same order.
		if goods := r.sess.Goods(); len(goods) > 0 {
			return goods[0]
		}
		return plumbing.ZeroHash
	}
	flaky := r.start.Meta["flaky"] != ""
	var res bisect.Result
	var runErr error
	if flaky {
		res, runErr = r.bisectFlaky(ctx, tester)
	} else {
		res, runErr = bisect.Drive(ctx, r.sess, r.log, tester.Test, r.ev)
	}

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
		fmt.Fprintf(r.o.Messages, "hint: %d commits were read from their objects; `git commit-graph write --reachable` in %s makes this several times faster\n", g.CommitsRead(), tree.Dir)
	}
	out := report.RunJSONOf(res, r.stateDir, runErr)
	if restoreErr != nil {
		if out.Error != "" {
			out.Error += "; "
		}
		out.Error += restoreErr.Error()
	}
	save := saveResult
	if flaky {
		save = saveFlakyResult
	}
	// Saved also when the run was cancelled, its git bounded on its own.
	saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := save(saveCtx, g, r.log, res, out); err != nil {
		fmt.Fprintf(r.o.Messages, "kbisect: %v\n", err)
	}
	if runErr != nil && restoreErr != nil {
		fmt.Fprintf(r.o.Messages, "kbisect: %v\n", restoreErr)
	}
	result := &Result{Kind: res.Kind, JSON: out, Bisection: res, Graph: g, Ended: runErr == nil}
	switch {
	case runErr != nil:
		result.Kind = bisect.Aborted
		return result, runErr
	case restoreErr != nil:
		return result, restoreErr
	}
	return result, nil
}
