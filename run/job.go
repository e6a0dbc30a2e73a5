package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/internal/commitid"
	"kbisect/internal/usage"
	"kbisect/lab"
	"kbisect/report"
	"kbisect/worktree"
)

// jobRun is one kbisect run --job: the job's tree read, never checked
// out (kernels build in kbuild's slots), the lab pipeline as the tester.
type jobRun struct {
	o JobOptions

	job    *configs.Job   // the first job: build, workload, verdict
	jobs   []*configs.Job // one per machine
	jobSum string
	bisection
	start bisect.Record
	pipe  *lab.Pipeline
	// machines are the pipelines of several machines, in the jobs'
	// order; down why each left out at the preflight was (nil: ready).
	machines []*lab.Pipeline
	down     []error
	logs     []*os.File
	buildLog *os.File
	ev       *events
	ahead    *lab.Ahead
	qemu     *lab.QEMULab
	aheadLog *os.File
}

func (r *jobRun) close() {
	if r.qemu != nil {
		r.qemu.Close()
	}
	r.bisection.close()
	if r.ahead != nil {
		r.ahead.Close()
	}
	for _, f := range r.logs {
		f.Close()
	}
	for _, f := range []*os.File{r.buildLog, r.aheadLog} {
		if f != nil {
			f.Close()
		}
	}
}

// Job bisects kernels on the job files' machines to the first bad commit,
// or resumes the run its state directory holds. An error says why the run
// stopped without an answer; the result's JSON says so too.
func Job(ctx context.Context, o JobOptions) (*Result, error) {
	if o.Messages == nil {
		o.Messages = io.Discard
	}
	r := &jobRun{o: o, ev: newEvents(o.Progress)}
	res, err := r.run(ctx)
	if res.Graph != nil {
		r.g = nil // the result's now
	}
	r.close()
	return res, err
}

func (r *jobRun) run(ctx context.Context) (*Result, error) {
	if err := r.prepare(ctx); err != nil {
		return aborted(r.stateDir, err), err
	}
	return r.bisect(ctx)
}

func (r *jobRun) prepare(ctx context.Context) error {
	o := r.o
	switch {
	case o.Replay == "" && (o.Bad == "" || len(o.Goods) == 0):
		return usage.Errorf("run --job: --bad REV and at least one --good REV are required (or --replay FILE)")
	case o.Replay != "" && (o.Bad != "" || len(o.Goods) > 0):
		return usage.Errorf("run: --replay takes the range from the log: drop --good and --bad")
	case len(o.Jobs) == 0:
		return usage.Errorf("run: no job file")
	}
	files := o.Jobs
	var sums []string
	var snaps []*jobSnapshot
	for _, file := range files {
		job, err := configs.Open(file, o.Messages)
		if err != nil {
			return err
		}
		if job.Verdict.Search == configs.SearchRule {
			return ruleLeft(job, file)
		}
		if err := job.CheckEnv(nil); err != nil {
			return usage.Errorf("run --job %v (set it, or run validate to see where it is used)", err)
		}
		snap, err := snapshot(job)
		if err != nil {
			return usage.Errorf("run --job %s: %v", file, err)
		}
		sum, err := FileSHA256(file)
		if err != nil {
			return err
		}
		r.jobs, sums, snaps = append(r.jobs, job), append(sums, sum), append(snaps, snap)
	}
	if err := sameMachines(files, r.jobs); err != nil {
		return err
	}
	job := r.jobs[0]
	r.job = job
	// What the verdicts are made with: every job's settings, includes and
	// fragments by content (an older kbisect hashed the job files alone:
	// legacy finds its runs).
	r.jobSum = jobsIdentity(snaps)
	legacy := sums[0]
	if len(sums) > 1 {
		all := sha256.Sum256([]byte(strings.Join(sums, " ")))
		legacy = hex.EncodeToString(all[:])
	}
	tree := string(job.Build.Tree)
	var err error
	if r.g, err = bisect.OpenGraph(ctx, tree); err != nil {
		return usage.Errorf("build.tree %s: %v", tree, err)
	}
	start, marks, err := resolveRange(r.g, o.Range, "")
	if err != nil {
		return err
	}
	start.Meta["job"], start.Meta["job_sha256"], start.Meta["job_state"] = o.Jobs[0], r.jobSum, stateFormat
	if o.Command != "" {
		start.Meta["command"] = o.Command
	}
	if o.Reproduce != "" {
		start.Meta["reproduce"] = o.Reproduce
	}
	dir := o.State
	if dir == "" {
		wt, err := worktree.Open(ctx, tree)
		if err != nil {
			return fmt.Errorf("build.tree %s: %w", tree, err)
		}
		dir = filepath.Join(wt.GitDir, "kbisect", "run-"+runID(start, "job:"+r.jobSum))
		if old := filepath.Join(wt.GitDir, "kbisect", "run-"+runID(start, "job:"+legacy)); !holdsRun(dir) && holdsRun(old) {
			dir = old // begun by an older kbisect
		} else if !holdsRun(dir) {
			otherJobRuns(dir, start, snaps, o.Messages)
		}
	}
	if !answered(dir) {
		// Several machines of one search go on without those not ready.
		if r.down, err = preflight(ctx, r.jobs, dir, holdsRun(dir), len(r.jobs) > 1, r.ev.line); err != nil {
			return err
		}
	}
	records, err := r.openState(dir)
	if err != nil {
		return err
	}
	if len(records) > 0 {
		if err := sameRun(records[0], start, r.stateDir); err != nil {
			return err
		}
		if records[0].Meta["job_state"] == stateFormat {
			if err := checkSameJobs(r.stateDir, files, snaps, o.Messages); err != nil {
				return err
			}
		} else if records[0].Meta["job_sha256"] != legacy {
			return usage.Errorf("state directory %s holds verdicts made with another version of %s (its copy is %s); give another --state, or remove it to start over",
				r.stateDir, o.Jobs[0], filepath.Join(r.stateDir, "job.yaml"))
		}
		fmt.Fprintf(r.o.Messages, "kbisect: resuming from %s (%d verdicts)\n", r.stateDir, countVerdicts(records))
		if o.RetrySkips {
			if err := r.retrySkips(r.o.Messages); err != nil {
				return err
			}
		}
	} else {
		// The jobs as used: what the verdicts are made with.
		for i, snap := range snaps {
			if err := snap.save(r.stateDir, stateJobName(i)); err != nil {
				return err
			}
		}
		if err := r.log.Init(append([]bisect.Record{start}, marks...)...); err != nil {
			return err
		}
	}
	r.start = r.log.Records()[0]
	if r.sess, _, err = bisect.Restore(r.g, r.log.Records()); err != nil {
		return err
	}
	if r.buildLog, err = os.OpenFile(filepath.Join(r.stateDir, "build.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return err
	}
	bo := lab.BuildOptions(job, r.buildLog)
	if bo.Base, err = lab.BaseConfig(ctx, job, o.Messages); err != nil {
		return err
	}
	r.ev.g, r.ev.ctx = r.g, ctx
	r.pipe = &lab.Pipeline{Job: job, Build: bo, StateDir: r.stateDir, Progress: r.ev, BaseFile: baseFile(r.stateDir, "")}
	if job.Boot.Method == configs.BootQEMU {
		if len(r.jobs) > 1 {
			return usage.Errorf("run: boot.method qemu runs one local guest: give one --job")
		}
		if r.qemu, err = lab.NewQEMULab(job, r.stateDir, r.ev); err != nil {
			return err
		}
		r.pipe.Boot = r.qemu.Boot
	}
	if len(r.jobs) > 1 {
		// Several machines: one pipeline each, named, building in its
		// own slot of the shared cache, a kernel another is building
		// waited for rather than built beside it.
		under := &lab.UnderWay{}
		r.pipe.Name, r.pipe.BaseFile, r.pipe.UnderWay = job.Machine.Name, baseFile(r.stateDir, job.Machine.Name), under
		r.machines = []*lab.Pipeline{r.pipe}
		for i, j := range r.jobs[1:] {
			f, err := os.OpenFile(filepath.Join(r.stateDir, "build-"+FileSafe(j.Machine.Name)+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return err
			}
			r.logs = append(r.logs, f)
			b := bo
			b.Log = f
			r.machines = append(r.machines, &lab.Pipeline{Job: j, Build: b, StateDir: r.stateDir, Slot: i + 1,
				Name: j.Machine.Name, Progress: r.ev, BaseFile: baseFile(r.stateDir, j.Machine.Name), UnderWay: under})
		}
		if r.down == nil {
			r.down = make([]error, len(r.jobs)) // answered: no preflight
		}
	}
	if len(r.jobs) > 1 {
		// The search boots on all of them at once (drive's RunPool),
		// each free machine what tells the most beside what the others
		// measure; nothing is built ahead but what they boot.
		return nil
	}
	if job.Boot.Method == configs.BootQEMU && !o.NoBuildAhead {
		// The guest runs on this machine's CPUs: a build beside its
		// measurement would be its noise (measured: good kernels at
		// 7-11 ms of single noise instead of 0.5 ms).
		r.ev.line("the QEMU guest shares this machine's CPUs: no builds ahead while it measures")
		return nil
	}
	if !o.NoBuildAhead {
		// The search says what to build ahead (culprit.Search.Ahead).
		if r.aheadLog, err = os.OpenFile(filepath.Join(r.stateDir, "build-ahead.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return err
		}
		ab := bo
		ab.Log = r.aheadLog
		r.ahead = &lab.Ahead{Build: ab, Slot: 0, Progress: r.ev, Base: ctx}
		if ab.Server != nil {
			// A build server: as many builds ahead as it has slots.
			r.ahead.Slots = job.Build.Slots
		}
		r.pipe.Ahead = r.ahead
	}
	return nil
}

// bisect searches the range by the posterior, boot by boot, and reports.
func (r *jobRun) bisect(ctx context.Context) (*Result, error) {
	res, cal, sum, err := r.searchPosterior(ctx)
	return r.finish(ctx, res, cal, sum, err)
}

// finish saves the result and writes the reports.
func (r *jobRun) finish(ctx context.Context, res bisect.Result, cal *lab.Calibration, sum *lab.SearchSummary, err error) (*Result, error) {
	r.ev.done()
	if err == nil && sum != nil {
		err = r.logDecided(res)
	}
	rep := &report.Run{Graph: r.g, Job: r.job, StateDir: r.stateDir, Start: r.start, Result: res, Calibration: cal, Search: sum}
	out := report.RunJSONOf(res, r.stateDir, err)
	// The result is saved also when the run was cancelled: its git gets
	// a deadline of its own instead of the run's context.
	save, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	rep.AddTo(save, &out)
	if serr := saveResult(save, r.g, r.log, res, out); serr != nil {
		fmt.Fprintf(r.o.Messages, "kbisect: %v\n", serr)
	}
	result := &Result{Kind: res.Kind, JSON: out, Bisection: res, Graph: r.g, Report: rep, Ended: err == nil}
	if err != nil {
		result.Kind = bisect.Aborted
		return result, err
	}
	job := r.job
	if r.o.ReportDir != "" {
		j := *job
		j.Report.Dir = configs.Path(r.o.ReportDir)
		job = &j
	}
	if files, rerr := report.WriteFiles(ctx, job, r.stateDir); rerr != nil {
		fmt.Fprintf(r.o.Messages, "kbisect: the reports: %v\n", rerr)
	} else if len(files) > 0 {
		result.Reports = files
		r.ev.line("reports: %s", strings.Join(files, " "))
	}
	return result, nil
}

// findGoodOn says whether a good endpoint that measured bad is walked
// back from: --find-good when given, else the job's find_good.enabled,
// else on when a person watches (a terminal, not CI).
func (r *jobRun) findGoodOn() bool {
	if r.o.FindGood != nil {
		return *r.o.FindGood
	}
	if _, ok := r.job.Pos("find_good.enabled"); ok {
		return r.job.FindGood.Enabled
	}
	return r.o.Interactive
}

// givenGood is the good endpoint the run was given: its commit, and its
// name as typed when one of the --good revisions names it (a release tag
// the walk back starts below).
func (r *jobRun) givenGood(g *bisect.Graph) (plumbing.Hash, string) {
	good := plumbing.NewHash(r.start.Good[0])
	rev := good.String()
	for _, gr := range r.start.GoodRevs {
		if h, err := g.Resolve(gr); err == nil && h == good {
			rev = gr
		}
	}
	return good, rev
}

// restartRange makes the bisection's range the one the walk back found:
// from the release that measured good to the oldest one that measured
// bad. The log records it once; a resumed run finds it there.
func (r *jobRun) restartRange(s *lab.Search) error {
	for _, rec := range r.log.Records() {
		if rec.Event == bisect.EventRange {
			return nil
		}
	}
	note := fmt.Sprintf("the good endpoint %s measured bad; %s measured good after %d kernels", commitid.Short(s.Given), s.Found, s.Kernels)
	if err := r.log.Append(bisect.Record{Event: bisect.EventRange, Bad: s.Bad, Good: []string{s.Good}, Note: note}); err != nil {
		return err
	}
	sess, _, err := bisect.Restore(r.g, r.log.Records())
	if err != nil {
		return err
	}
	r.sess = sess
	return nil
}

// ruleLeft is the error of a job that asks run --job for git's choice of
// commits, which it no longer makes: where the key is, and what to do.
func ruleLeft(job *configs.Job, file string) error {
	at := file
	if pos, ok := job.Pos("verdict.search"); ok {
		at = pos.String()
	}
	return usage.Errorf("%s: verdict.search: rule: run --job searches by the posterior only (boot by boot, on one machine or several, walking back with --find-good): remove the key. git's exact choice of commits stays in run --exec without --confidence; a state directory a rule run made still reports (kbisect report --state DIR)", at)
}
