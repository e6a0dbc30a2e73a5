package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/urfave/cli/v2"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/history"
	"kbisect/internal/usage"
	"kbisect/lab"
	"kbisect/noise"
	"kbisect/report"
	"kbisect/run"
	"kbisect/worktree"
)

// exitRegression is nightly's answer when the newest release is noisier
// than the machine's last good one: CI marks the night red.
const exitRegression = 5

// nightlyOptions are the flags of kbisect nightly.
type nightlyOptions struct {
	Job, Remote, Branch, Tags, DB string
	JSON, Verbose                 bool
}

func nightlyCommand() *cli.Command {
	return &cli.Command{
		Name:  "nightly",
		Usage: "measure the release tags new since the last night; bisect a regression once",
		UsageText: `kbisect nightly --job FILE --remote URL|PATH [--branch B] [--tags GLOB]
       [--db FILE] [--json]`,
		Description: `nightly runs from cron, a systemd timer or a CI schedule, one job file
per machine. It fetches the branch and the tags from --remote into the
job's build.tree (git fetch: the work tree is not touched) and takes the
release tags matching --tags (default v*; with --branch, those on it)
newer than the newest one this machine has measured. The first night
measures the newest tag only: the baseline.

The newest new tag is judged against the baseline, the newest release
measured good on the machine: alone with an absolute verdict.threshold,
against the baseline's samples with a ratio or auto one (the first night's
release is the baseline). A baseline measured longer ago than
nightly.baseline_max_age is measured again beside the new release, in
alternating rounds; a new release bad against a baseline of another night
is confirmed by the baseline measured again. A baseline bad too is the
machine's drift: nothing is bisected, and the next nights measure both
again until it is quiet.

Good: recorded, and an open incident is closed ("fixed in vX"). Bad: if an
incident is open, it is reported as still present since its first bad
tag, with its first bad commit, and nothing is bisected again. Otherwise
the older new tags are measured newest first (missed nights) down to a
good one, and the range from the last good tag to the first bad one is
bisected with the whole run pipeline (a state directory per incident); the
incident and its answer are recorded.

History goes to an SQLite database (--db; default <git-dir of
build.tree>/kbisect/history.db, shared by the machines of a controller):
every tag's samples and per-CPU numbers, verdicts, incidents. kbisect
history shows it. The night's reports (report.formats: text, markdown,
json, html, junit) are written as night.<ext> in report.dir, or the
machine's nightly directory. Two nightly runs for one machine never run at
once. See docs/ci.md.

EXIT STATUS
   0 no regression (or nothing new), 5 a regression (new or still present),
   4 the machine drifted, 1 failure, 2 usage or job file error,
   130 interrupted.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "job", Usage: "the machine's job file"},
			&cli.StringFlag{Name: "remote", Usage: "the git URL or path to fetch the releases from"},
			&cli.StringFlag{Name: "branch", Usage: "the branch the releases are on (e.g. linux-6.12.y); default: any tag"},
			&cli.StringFlag{Name: "tags", Value: "v*", Usage: "the release tags to follow (a glob)"},
			&cli.StringFlag{Name: "db", Usage: "the history database (default <git-dir>/kbisect/history.db)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object on stdout at the end"},
			verboseFlag(),
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.Args().Len() > 0 {
				return usagef("nightly: unexpected argument %q", c.Args().First())
			}
			o := nightlyOptions{Job: c.String("job"), Remote: c.String("remote"), Branch: c.String("branch"), Tags: c.String("tags"),
				DB: c.String("db"), JSON: c.Bool("json"), Verbose: c.Bool("verbose")}
			return runNightly(c.Context, o, c.App.Writer, c.App.ErrWriter)
		},
	}
}

// nightlyJSON is nightly's --json answer.
type nightlyJSON struct {
	// Result: nothing-new, no-regression, fixed, regression,
	// still-present, drift, unknown, aborted.
	Result   string         `json:"result"`
	Machine  string         `json:"machine"`
	Measured []nightTagJSON `json:"measured"`
	Incident *incidentJSON  `json:"incident,omitempty"`
	Message  string         `json:"message"`
	Error    string         `json:"error,omitempty"`
}

type nightTagJSON struct {
	Tag      string  `json:"tag"`
	Commit   string  `json:"commit"`
	Verdict  string  `json:"verdict"`
	Median   float64 `json:"median"`
	Reason   string  `json:"reason"`
	Baseline string  `json:"baseline,omitempty"`
}

type incidentJSON struct {
	ID        int64  `json:"id"`
	LastGood  string `json:"last_good"`
	FirstBad  string `json:"first_bad_tag"`
	Result    string `json:"result"`
	Commit    string `json:"first_bad_commit,omitempty"`
	Subject   string `json:"subject,omitempty"`
	StateDir  string `json:"state_dir"`
	ClosedTag string `json:"closed_tag,omitempty"`
}

// night is one nightly run for one machine.
type night struct {
	o              nightlyOptions
	stdout, stderr io.Writer
	job            *configs.Job
	dir            string // <git-dir>/kbisect/nightly-<machine>
	db             *history.DB
	where          history.Where
	pipe           *lab.Pipeline
	closePipe      func()
	start          time.Time
	stamp          string // the night's start, for the names of what it measures
	base           *baseline
	rows           []history.Measurement // what this night measured
	unlock         func()                // the machine's lock, held until the reports are written
	out            nightlyJSON
}

// baseline is what a new release is judged against: the newest release
// measured good on the machine, with its samples.
type baseline struct {
	tag, commit string
	values      []float64
	at          time.Time
	// stale says it is measured again before a release is judged against
	// it (why says why): its measurement is older than
	// nightly.baseline_max_age, or its newest one is not good (the
	// machine drifted).
	stale bool
	why   string
	// tonight says this night measured it.
	tonight bool
}

func runNightly(ctx context.Context, o nightlyOptions, stdout, stderr io.Writer) error {
	n := &night{o: o, stdout: stdout, stderr: stderr, start: time.Now()}
	n.stamp = n.start.UTC().Format("20060102T150405Z")
	defer n.close()
	ctx = traceCommands(ctx, o.Verbose, func(s string) { fmt.Fprintln(stderr, s) })
	err := n.run(ctx)
	var re *resultError
	if err != nil && !errors.As(err, &re) && n.out.Result == "" {
		n.out.Result = "aborted"
	}
	if n.db != nil && n.out.Result != "" && !usage.Is(err) {
		// A report that cannot be written is said; the night's answer
		// stands.
		files, rerr := n.writeReports(context.WithoutCancel(ctx), err)
		if rerr != nil {
			n.say("writing the night's reports: %v", rerr)
			if err == nil {
				err = rerr
			}
		} else if len(files) > 0 {
			n.say("reports: %s", strings.Join(files, " "))
		}
	}
	if o.JSON {
		if err != nil {
			var re *resultError
			if !errors.As(err, &re) {
				n.out.Error = err.Error()
			}
		}
		if n.out.Measured == nil {
			n.out.Measured = []nightTagJSON{}
		}
		b, _ := json.MarshalIndent(n.out, "", "  ")
		fmt.Fprintln(stdout, string(b))
		var re *resultError
		if err != nil && !errors.As(err, &re) {
			return &reportedError{err}
		}
	} else if n.out.Message != "" {
		fmt.Fprintln(stdout, n.out.Message)
	}
	return err
}

func (n *night) close() {
	if n.closePipe != nil {
		n.closePipe()
	}
	if n.db != nil {
		n.db.Close()
	}
	if n.unlock != nil {
		n.unlock()
	}
}

func (n *night) say(format string, args ...any) {
	fmt.Fprintf(n.stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (n *night) run(ctx context.Context) error {
	o := n.o
	switch {
	case o.Job == "":
		return usagef("nightly: --job FILE is required")
	case o.Remote == "":
		return usagef("nightly: --remote URL is required (where the releases are fetched from)")
	case strings.HasPrefix(o.Remote, "-"):
		return usagef("nightly --remote %q: a URL or a path, not an option", o.Remote)
	}
	if o.Branch != "" {
		if err := exec.Command("git", "check-ref-format", "--branch", o.Branch).Run(); err != nil || strings.ContainsAny(o.Branch, "*?[") {
			return usagef("nightly --branch %q: not a branch name", o.Branch)
		}
	}
	if _, err := path.Match(o.Tags, "v6.12.1"); err != nil {
		return usagef("nightly --tags %q: %v", o.Tags, err)
	}
	job, err := loadJob(o.Job, n.stderr)
	if err != nil {
		return err
	}
	if err := job.CheckEnv(nil); err != nil {
		return usagef("nightly --job %v (set it, or run validate to see where it is used)", err)
	}
	n.job = job
	n.out.Machine = job.Machine.Name
	tree := string(job.Build.Tree)
	wt, err := worktree.Open(ctx, tree)
	if err != nil {
		return usagef("build.tree %s: %v", tree, err)
	}
	n.dir = filepath.Join(wt.GitDir, "kbisect", "nightly-"+run.FileSafe(job.Machine.Name))
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	if n.unlock, err = lockNightly(n.dir); err != nil {
		return err
	}
	dbPath := o.DB
	if dbPath == "" {
		dbPath = filepath.Join(wt.GitDir, "kbisect", "history.db")
	}
	if n.db, err = history.Open(ctx, dbPath); err != nil {
		return err
	}
	remote := remoteName(o.Remote)
	n.where = history.Where{Machine: job.Machine.Name, Remote: remote, Branch: o.Branch}

	n.say("fetching %s%s into %s", remote, map[bool]string{true: " " + o.Branch, false: ""}[o.Branch != ""], tree)
	fetchFrom := o.Remote
	if strings.HasPrefix(remote, "/") {
		fetchFrom = remote // git -C would read a relative path from the tree
	}
	head, err := fetchReleases(ctx, tree, wt.GitDir, fetchFrom, o.Branch)
	if err != nil {
		return err
	}
	g, err := bisect.OpenGraph(tree)
	if err != nil {
		return err
	}
	defer g.Close()
	tags, err := followedReleases(g, o.Tags, head)
	if err != nil {
		return err
	}
	past, err := n.db.Measurements(ctx, n.where)
	if err != nil {
		return err
	}
	incidents, err := n.db.Incidents(ctx, n.where)
	if err != nil {
		return err
	}
	var opened []*history.Incident
	for i := range incidents {
		if incidents[i].Open() {
			opened = append(opened, &incidents[i])
		}
	}
	var open *history.Incident
	if len(opened) > 0 {
		open = opened[len(opened)-1]
	}
	// What a night stopped midway left: a bisection that did not end,
	// or a bad release measured and no incident opened for it. Both are
	// finished before anything new.
	if open != nil && open.Result == "" && open.StateDir != "" {
		n.say("the bisection of the regression since %s did not end: resuming it (state %s)", open.FirstBadTag, open.StateDir)
		return n.finishIncident(ctx, g, open)
	}
	if open == nil {
		if good, bad := pendingRegression(past); bad != "" && good != "" {
			n.say("%s measured bad and no incident was opened for it (a night stopped midway): opening it", bad)
			return n.openIncident(ctx, g, good, bad)
		}
	}

	n.base = baselineOf(past, job.Verdict.Metric, job.Nightly.BaselineMaxAge.D(), n.start)
	fresh, retry := newReleases(tags, past), false
	if len(past) == 0 && len(fresh) > 1 {
		fresh = fresh[:1] // the first night: the newest is the baseline
	}
	if tag := unjudgedRelease(past); len(fresh) == 0 && tag != "" && n.base != nil {
		// The machine drifted, or the release was unsure beside its
		// baseline: it is judged again, until it has a verdict.
		for _, r := range tags {
			if r.Tag == tag {
				n.say("%s has no verdict yet (the last night measured it beside %s, and could not judge it): measuring it again", tag, n.base.tag)
				fresh, retry = []bisect.Release{r}, true
			}
		}
	}
	if len(fresh) == 0 {
		n.out.Result, n.out.Message = "nothing-new", fmt.Sprintf("%s: no release tag newer than the last measured one", job.Machine.Name)
		return nil
	}
	if !retry {
		n.say("%d new release tag(s): %s", len(fresh), strings.Join(tagNames(fresh), " "))
	}
	if err := n.setupPipeline(ctx); err != nil {
		return err
	}

	// The newest release with a verdict: one that does not build or
	// boot says nothing, the next older one is measured instead.
	var newest history.Measurement
	for len(fresh) > 0 {
		m, err := n.judge(ctx, fresh[0], open == nil)
		if err != nil {
			return err
		}
		fresh = fresh[1:]
		if m.Verdict == verdictDrift {
			return n.drift(m)
		}
		if m.Verdict == string(noise.Good) || m.Verdict == string(noise.Bad) {
			newest = m
			break
		}
		n.say("%s could not be judged (%s): the next older release is measured", m.Tag, m.Reason)
	}
	switch newest.Verdict {
	case string(noise.Good):
		n.out.Result = "no-regression"
		n.out.Message = fmt.Sprintf("%s: %s is good: %s", job.Machine.Name, newest.Tag, newest.Reason)
		for _, o := range opened {
			if err := n.db.CloseIncident(ctx, o.ID, newest.Tag, time.Now()); err != nil {
				return err
			}
			o.ClosedTag = newest.Tag
			n.out.Result, n.out.Incident = "fixed", incidentOf(*o)
			n.out.Message = fmt.Sprintf("%s: %s is good again: the regression since %s (%s) is fixed in %s", job.Machine.Name, newest.Tag,
				o.FirstBadTag, describeCulprit(*o), newest.Tag)
		}
		return nil
	case string(noise.Bad):
	default:
		n.out.Result = "unknown"
		n.out.Message = fmt.Sprintf("%s: no new release could be judged (the newest: %s)", job.Machine.Name, n.out.Measured[0].Reason)
		return &resultError{exitFailure}
	}
	if open != nil {
		n.out.Result, n.out.Incident = "still-present", incidentOf(*open)
		n.out.Message = fmt.Sprintf("%s: %s is bad: %s\nstill present since %s (%s)", job.Machine.Name, newest.Tag, newest.Reason, open.FirstBadTag, describeCulprit(*open))
		return &resultError{exitRegression}
	}

	// A new regression: the first bad tag is the oldest new one that
	// measures bad, down to one that measures good (nights missed).
	firstBad, lastGood := newest, ""
	if n.base != nil {
		lastGood = n.base.tag
	}
	for _, r := range fresh {
		m, err := n.judge(ctx, r, false)
		if err != nil {
			return err
		}
		if m.Verdict == verdictDrift {
			return n.drift(m)
		}
		if m.Verdict == string(noise.Good) {
			lastGood = m.Tag
			break
		}
		if m.Verdict == string(noise.Bad) {
			firstBad = m
		}
	}
	if lastGood == "" {
		n.out.Result = "regression"
		n.out.Message = fmt.Sprintf("%s: %s is bad: %s; no release measured good on this machine yet, so there is nothing to bisect from", job.Machine.Name, newest.Tag, newest.Reason)
		return &resultError{exitRegression}
	}
	return n.openIncident(ctx, g, lastGood, firstBad.Tag)
}

// drift ends a night whose baseline measured bad again: the machine, not
// the kernel, is noisier.
func (n *night) drift(m history.Measurement) error {
	n.out.Result = "drift"
	n.out.Message = fmt.Sprintf("%s: %s\nthe machine is noisier, not the kernel: check its firmware and BIOS settings, its temperature and what else runs on it; the next nights measure both again",
		n.job.Machine.Name, m.Reason)
	return &resultError{exitNotReproduced}
}

// openIncident records a regression between two releases and bisects it.
// The state directory is named by the range and recorded before the
// bisection starts: a night stopped in the middle resumes it.
func (n *night) openIncident(ctx context.Context, g *bisect.Graph, lastGood, firstBad string) error {
	inc := history.Incident{LastGood: lastGood, FirstBadTag: firstBad, OpenedAt: time.Now(),
		StateDir: filepath.Join(n.dir, "incident-"+run.FileSafe(lastGood)+".."+run.FileSafe(firstBad))}
	id, err := n.db.OpenIncident(ctx, n.where, inc)
	if err != nil {
		return err
	}
	inc.ID = id
	n.say("%s is bad and %s good: bisecting (state %s)", firstBad, lastGood, inc.StateDir)
	return n.finishIncident(ctx, g, &inc)
}

// pendingRegression finds, in the measurements, a bad release newer than
// the newest good one: the oldest such bad one and that good one ("" when
// the newest measured release is good, or none is good).
func pendingRegression(past []history.Measurement) (good, bad string) {
	type rel struct {
		r bisect.Release
		m history.Measurement
	}
	var rs []rel
	for _, m := range past {
		if r, ok := bisect.ParseRelease(m.Tag); ok && (m.Verdict == string(noise.Good) || m.Verdict == string(noise.Bad)) {
			rs = append(rs, rel{r, m})
		}
	}
	slices.SortStableFunc(rs, func(a, b rel) int { return bisect.CompareReleases(b.r, a.r) }) // newest first
	for _, x := range rs {
		if x.m.Verdict == string(noise.Good) {
			return x.m.Tag, bad
		}
		bad = x.m.Tag
	}
	return "", bad
}

// finishIncident bisects an incident's range (or resumes its bisection)
// and records the answer.
func (n *night) finishIncident(ctx context.Context, g *bisect.Graph, inc *history.Incident) error {
	if n.closePipe != nil {
		n.closePipe() // a QEMU guest left running would be the bisection's noise
		n.closePipe = nil
	}
	res, err := n.bisect(ctx, inc.LastGood, inc.FirstBadTag, inc.StateDir)
	if err != nil {
		return err
	}
	inc.Result, inc.FirstBad = res.Result, res.FirstBad
	if h, ok := bisect.ParseHash(res.FirstBad); ok {
		if info, err := g.Info(h); err == nil {
			inc.Subject = info.Subject
		}
	}
	if err := n.db.SetBisection(ctx, inc.ID, inc.Result, inc.FirstBad, inc.Subject); err != nil {
		return err
	}
	n.out.Result, n.out.Incident = "regression", incidentOf(*inc)
	n.out.Message = fmt.Sprintf("%s: a regression between %s (good) and %s (bad): %s\nreports in %s", n.job.Machine.Name, inc.LastGood, inc.FirstBadTag,
		describeCulprit(*inc), inc.StateDir)
	return &resultError{exitRegression}
}

// bisect runs the whole run pipeline between two tags, in its own state
// directory, and returns its answer.
func (n *night) bisect(ctx context.Context, good, bad, state string) (report.RunJSON, error) {
	var out bytes.Buffer
	err := runRun(ctx, runOptions{Jobs: []string{n.o.Job}, Goods: []string{good}, Bad: bad, State: state, JSON: true, Verbose: n.o.Verbose,
		ReportDir: state}, &out, n.stderr)
	var res report.RunJSON
	if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
		return res, errors.Join(err, fmt.Errorf("the bisection's answer: %v", jerr))
	}
	var re *resultError
	if err != nil && !errors.As(err, &re) {
		return res, err
	}
	return res, nil
}

// setupPipeline makes the pipeline that measures the tags, in the
// nightly directory: what it measures is kept there (a release judged
// alone by an absolute threshold is not measured twice; samples taken
// to judge beside a baseline are named by the night).
func (n *night) setupPipeline(ctx context.Context) error {
	job := n.job
	buildLog, err := os.OpenFile(filepath.Join(n.dir, "build.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	bo := lab.BuildOptions(job, buildLog)
	if bo.Base, err = lab.BaseConfig(ctx, job, n.stderr); err != nil {
		buildLog.Close()
		return err
	}
	n.pipe = &lab.Pipeline{Job: job, Build: bo, StateDir: filepath.Join(n.dir, "tags"), Progress: func(e lab.Event) {
		switch {
		case e.Phase == lab.PhaseMeasure && e.Sample > 0:
			n.say("%s sample %d: %s", short(e.Commit), e.Sample, noise.FormatValue(e.Kind, e.Value))
		case e.Note != "":
			n.say("%s %s: %s", short(e.Commit), e.Phase, e.Note)
		default:
			n.say("%s %s", short(e.Commit), e.Phase)
		}
	}}
	var q *lab.QEMULab
	if job.Boot.Method == configs.BootQEMU {
		if q, err = lab.NewQEMULab(job, n.dir, func(s string) { n.say("%s", s) }); err != nil {
			buildLog.Close()
			return err
		}
		n.pipe.Boot = q.Boot
	}
	n.closePipe = func() {
		if q != nil {
			q.Close()
		}
		buildLog.Close()
	}
	r, err := lab.Rule(job, nil, nil)
	if err != nil {
		return err
	}
	n.pipe.SetRule(r)
	return nil
}

// verdictDrift is a release's verdict, and its baseline's, when the
// baseline measured again beside it is bad too: the machine changed.
const verdictDrift = "drift"

// baselineOf finds the baseline in the history: the newest release
// measured good (nil when none is).
func baselineOf(past []history.Measurement, metric string, maxAge time.Duration, now time.Time) *baseline {
	var b *baseline
	for i := len(past) - 1; i >= 0; i-- {
		if m := past[i]; m.Verdict == string(noise.Good) {
			b = &baseline{tag: m.Tag, commit: m.Commit, values: m.Values, at: m.MeasuredAt}
			if m.Metric != metric {
				b.stale, b.why = true, fmt.Sprintf("it was measured on %s, and the job now judges %s", m.Metric, metric)
			}
			break
		}
	}
	if b == nil || b.stale {
		return b
	}
	for i := len(past) - 1; i >= 0; i-- {
		if m := past[i]; m.Tag == b.tag {
			if m.Verdict != string(noise.Good) {
				b.stale, b.why = true, fmt.Sprintf("its last measurement (%s) was %s", m.MeasuredAt.Local().Format("2006-01-02 15:04"), m.Verdict)
			}
			break
		}
	}
	if age := now.Sub(b.at); !b.stale && age > maxAge {
		b.stale, b.why = true, fmt.Sprintf("measured %s ago, longer than nightly.baseline_max_age (%s)", ageText(age), configs.Duration(maxAge))
	}
	return b
}

// ageText says how long ago, in days from two of them.
func ageText(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%.0f days", d.Hours()/24)
	}
	return d.Round(time.Second).String()
}

// unjudgedRelease is the newest release measured when its baseline left
// it without a verdict: a drift, or unsure beside it ("" otherwise).
// The nights judge it again until it has one, or a newer release comes.
func unjudgedRelease(past []history.Measurement) string {
	var newest *history.Measurement
	var at bisect.Release
	for i := range past {
		r, ok := bisect.ParseRelease(past[i].Tag)
		if !ok {
			continue
		}
		if newest == nil || bisect.CompareReleases(r, at) >= 0 {
			newest, at = &past[i], r
		}
	}
	if newest != nil && (newest.Verdict == verdictDrift || (newest.Verdict == verdictSkip && newest.Baseline != "")) {
		return newest.Tag
	}
	return ""
}

// judge measures a release and decides it:
//   - with no baseline, an absolute threshold decides it alone, and with
//     a ratio or auto one it is the baseline (good: nothing to hold it
//     against);
//   - with a stale baseline, the two are measured in alternating rounds
//     and judged together;
//   - else an absolute threshold decides it alone, and a relative one
//     against the baseline's samples; a bad one, when confirm asks, is
//     confirmed by the baseline measured again tonight.
func (n *night) judge(ctx context.Context, r bisect.Release, confirm bool) (history.Measurement, error) {
	b := n.base
	if b != nil && b.stale && r.Tag != b.tag {
		return n.alternate(ctx, r)
	}
	n.say("measuring %s (%s)", r.Tag, short(r.Commit.String()))
	var ev *lab.Evidence
	var err error
	if lab.Relative(n.job) {
		ev, err = n.pipe.Sample(ctx, r.Commit.String(), lab.SampleCount(n.job), filepath.Join("samples", n.stamp+"-"+run.FileSafe(r.Tag)))
	} else {
		ev, err = n.pipe.Evidence(ctx, r.Commit.String())
	}
	if err != nil {
		return history.Measurement{}, fmt.Errorf("%s: %w", r.Tag, err)
	}
	cand := *ev // the pipeline keeps its own
	switch {
	case len(cand.Values) == 0:
		if cand.Verdict == "" {
			cand.Verdict = verdictSkip
		}
		return n.record(ctx, r.Tag, &cand, "")
	case b == nil && lab.Relative(n.job):
		cand.Verdict = string(noise.Good)
		cand.Reason = fmt.Sprintf("the baseline, median %s: the %s threshold judges the next releases against its samples",
			noise.FormatValue(cand.Kind, lab.Median(cand.Values)), n.job.Verdict.Threshold)
		return n.record(ctx, r.Tag, &cand, "")
	case b == nil:
		return n.record(ctx, r.Tag, &cand, "")
	}
	against := ""
	if lab.Relative(n.job) {
		base := &lab.Evidence{Commit: b.commit, Values: b.values, Kind: cand.Kind, Metric: cand.Metric}
		c, err := lab.JudgeBeside(n.job, base, &cand, b.tag, r.Tag)
		if err != nil {
			return history.Measurement{}, err
		}
		_, _, cand.Verdict, cand.Reason = pairVerdicts(n.job, c)
		against = b.tag
	}
	if !confirm || cand.Verdict != string(noise.Bad) || b.tonight {
		return n.record(ctx, r.Tag, &cand, against)
	}
	n.say("%s measures bad against %s, measured %s: %s is measured again tonight before this is called a regression",
		r.Tag, b.tag, b.at.Local().Format("2006-01-02 15:04"), b.tag)
	g, err := n.pipe.Sample(ctx, b.commit, lab.SampleCount(n.job), filepath.Join("samples", n.stamp+"-"+run.FileSafe(b.tag)))
	if err != nil {
		return history.Measurement{}, fmt.Errorf("%s: %w", b.tag, err)
	}
	if len(g.Values) == 0 {
		// A release that measured good and no longer builds or boots
		// (a new compiler, a lab change) cannot confirm anything: the
		// release stands as judged, and says so.
		cand.Reason += fmt.Sprintf("; the baseline %s could not be measured again: %s", b.tag, g.Reason)
		n.say("%s could not be measured again (%s): %s stands as judged", b.tag, g.Reason, r.Tag)
		return n.record(ctx, r.Tag, &cand, against)
	}
	again := *ev
	c, err := n.pipe.JudgeTonight(ctx, g, &again, b.tag, r.Tag)
	if err != nil {
		return history.Measurement{}, err
	}
	return n.recordPair(ctx, c, r.Tag, "after it measured bad")
}

// alternate measures the baseline again beside a release, in alternating
// rounds (baseline first, each round a fresh boot), and judges the two
// on all their samples. A baseline that no longer builds or boots is
// left: the release is judged as if the baseline were fresh.
func (n *night) alternate(ctx context.Context, r bisect.Release) (history.Measurement, error) {
	b := n.base
	rounds := max(1, n.job.Nightly.Rounds)
	per := (lab.SampleCount(n.job) + rounds - 1) / rounds
	n.say("measuring %s beside %s in %d alternating rounds of %d samples: %s", r.Tag, b.tag, rounds, per, b.why)
	plan := lab.ABPlan{A: b.commit, B: r.Commit.String(), ALabel: b.tag, BLabel: r.Tag, Rounds: rounds, Samples: per,
		Name: filepath.Join("beside", n.stamp+"-"+run.FileSafe(b.tag)+".."+run.FileSafe(r.Tag))}
	res, err := n.pipe.AB(ctx, plan)
	var re *lab.RoundError
	switch {
	case errors.As(err, &re) && re.Side == "b":
		ev := *re.Evidence
		if ev.Verdict == "" || ev.Verdict == string(noise.Good) {
			ev.Verdict = verdictSkip
		}
		return n.record(ctx, r.Tag, &ev, "")
	case errors.As(err, &re):
		n.say("the baseline %s could not be measured again (%s): %s is judged against its measurement of %s", b.tag, re.Evidence.Reason,
			r.Tag, b.at.Local().Format("2006-01-02"))
		b.stale, b.tonight = false, true // nothing better tonight
		return n.judge(ctx, r, false)
	case err != nil:
		return history.Measurement{}, err
	}
	c, err := n.pipe.JudgeTonight(ctx, res.Pooled("a"), res.Pooled("b"), b.tag, r.Tag)
	if err != nil {
		return history.Measurement{}, err
	}
	return n.recordPair(ctx, c, r.Tag, fmt.Sprintf("%d alternating rounds", rounds))
}

// verdictSkip is the verdict of a release that could not be judged.
const verdictSkip = "skip"

// pairVerdicts are the verdicts of a baseline and a release judged
// beside it, with their reasons.
//   - Under a ratio or auto threshold the baseline is good by
//     definition: it is the reference. The release is bad when the rule
//     says so, good when it is no worse than the baseline or the rule
//     calls it good, and unsure (skip) otherwise.
//   - Under an absolute one each is decided. A bad release beside a bad
//     baseline is the machine's drift; beside a baseline that is not
//     surely good it is not judged (skip): nothing is bisected from a
//     baseline in doubt.
func pairVerdicts(job *configs.Job, c *lab.Calibration) (baseV, baseWhy, relV, relWhy string) {
	baseV, baseWhy, relV, relWhy = c.Good.Verdict, c.Good.Reason, c.Bad.Verdict, c.Bad.Reason
	if lab.Relative(job) {
		baseV = string(noise.Good)
		switch {
		case c.Reproduced:
			relV = string(noise.Bad)
		case c.Bad.Decision != nil && c.Bad.Decision.Verdict == noise.Good, !c.Rule.Worse(c.Bad.Values, c.Good.Values):
			relV = string(noise.Good)
		default:
			relV, relWhy = verdictSkip, "unsure: "+strings.TrimPrefix(relWhy, "unsure: ")
		}
		return
	}
	switch {
	case relV == string(noise.Bad) && baseV == string(noise.Bad):
		return verdictDrift, baseWhy, verdictDrift, relWhy
	case relV == string(noise.Bad) && baseV != string(noise.Good):
		relV, relWhy = verdictSkip, fmt.Sprintf("%s; but the baseline measured again is not surely good (%s)", relWhy, baseWhy)
	}
	return
}

// recordPair records a baseline and a release judged beside each other,
// the baseline first: when it is good it is the baseline again (fresh
// for the rest of the night), unless the release is good too and takes
// its place.
func (n *night) recordPair(ctx context.Context, c *lab.Calibration, tag, how string) (history.Measurement, error) {
	b := n.base
	baseV, baseWhy, relV, relWhy := pairVerdicts(n.job, c)
	rel, base := *c.Bad, *c.Good
	rel.Verdict, rel.Reason = relV, relWhy
	base.Verdict, base.Reason = baseV, fmt.Sprintf("measured again beside %s (%s): %s", tag, how, baseWhy)
	if relV == verdictDrift {
		rel.Reason = fmt.Sprintf("%s, measured good on %s, is bad now beside %s (%s): %s: median %s, was %s; %s: %s",
			b.tag, b.at.Local().Format("2006-01-02"), tag, how, b.tag, noise.FormatValue(base.Kind, lab.Median(base.Values)),
			noise.FormatValue(base.Kind, lab.Median(b.values)), tag, relWhy)
	}
	if _, err := n.record(ctx, b.tag, &base, ""); err != nil {
		return history.Measurement{}, err
	}
	if baseV == string(noise.Good) {
		b.values, b.at, b.stale, b.tonight = base.Values, time.Now(), false, true
	}
	return n.record(ctx, tag, &rel, b.tag)
}

// record writes a release's measurement, as judged, to the history.
func (n *night) record(ctx context.Context, tag string, ev *lab.Evidence, against string) (history.Measurement, error) {
	m := history.Measurement{Tag: tag, Commit: ev.Commit, Release: ev.Release, Signature: ev.Signature, Metric: ev.Metric, Kind: ev.Kind,
		Values: ev.Values, Verdict: ev.Verdict, Reason: ev.Reason, Baseline: against, Night: n.start.UTC().Format(time.RFC3339),
		MeasuredAt: time.Now(), StateDir: n.pipe.StateDir}
	if m.Values == nil {
		m.Values = []float64{}
	}
	if m.Metric == "" {
		m.Metric = n.job.Verdict.Metric
	}
	m.Median = lab.Median(m.Values)
	if ev.Decision != nil {
		m.Median, m.Threshold = ev.Decision.Median, ev.Decision.Threshold
	}
	if len(ev.Samples) > 0 {
		m.CPUs = cpuValues(report.MedianSample(ev), n.job.Verdict.Metric)
	}
	if _, err := n.db.AddMeasurement(ctx, n.where, m); err != nil {
		return m, err
	}
	n.say("%s: %s: %s", tag, m.Verdict, m.Reason)
	n.rows = append(n.rows, m)
	n.out.Measured = append(n.out.Measured, nightTagJSON{Tag: m.Tag, Commit: m.Commit, Verdict: m.Verdict, Median: m.Median, Reason: m.Reason,
		Baseline: against})
	return m, nil
}

// cpuValues are a sample's per-CPU values of the metric.
func cpuValues(m *noise.Measurement, metric string) []history.CPUValue {
	vals, err := m.MetricValues(metric)
	if err != nil || len(vals) != len(m.CPUs) {
		return nil
	}
	out := make([]history.CPUValue, len(vals))
	for i, v := range vals {
		out[i] = history.CPUValue{CPU: m.CPUs[i].CPU, Name: metric, Value: v}
	}
	return out
}

// fetchReleases fetches the branch (when given) and the tags from the
// remote into the tree, with git; it returns the fetched branch's head
// (zero without a branch).
func fetchReleases(ctx context.Context, tree, gitDir, remote, branch string) (plumbing.Hash, error) {
	git := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", tree}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0") // a prompt would hang the night
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	}
	args := []string{"fetch", "--quiet", "--", remote, "refs/tags/*:refs/tags/*"}
	ref := ""
	if branch != "" {
		ref = "refs/remotes/kbisect-nightly/" + branch
		args = append(args, "+refs/heads/"+branch+":"+ref)
	}
	// Machines sharing the tree fetch one at a time: git locks each ref.
	lock, err := os.OpenFile(filepath.Join(gitDir, "kbisect", "fetch.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return plumbing.ZeroHash, err
	}
	_, err = git(args...)
	_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("fetching %s into %s: %w", remoteName(remote), tree, err)
	}
	if ref == "" {
		return plumbing.ZeroHash, nil
	}
	out, err := git("rev-parse", "--verify", ref+"^{commit}")
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("%s after the fetch: %w", ref, err)
	}
	return plumbing.NewHash(strings.TrimSpace(string(out))), nil
}

// remoteName is how the history names a remote: a local path made
// absolute, a URL without its password or token.
func remoteName(remote string) string {
	if u, err := url.Parse(remote); err == nil && u.Scheme != "" && u.Host != "" {
		u.User = nil
		return u.String()
	}
	if !strings.Contains(remote, ":") || strings.HasPrefix(remote, "/") || strings.HasPrefix(remote, ".") {
		if abs, err := filepath.Abs(remote); err == nil {
			return abs
		}
	}
	return remote
}

// followedReleases are the release tags matching the glob (on the branch
// whose head is given), newest first.
func followedReleases(g *bisect.Graph, glob string, head plumbing.Hash) ([]bisect.Release, error) {
	all, err := g.Releases()
	if err != nil {
		return nil, err
	}
	var out []bisect.Release
	for _, r := range all {
		if ok, _ := path.Match(glob, r.Tag); !ok {
			continue
		}
		if !head.IsZero() {
			on, err := g.IsAncestor(r.Commit, head)
			if err != nil {
				return nil, err
			}
			if !on {
				continue
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// newReleases are those newer than every tag measured before, newest
// first (a tag older than the newest measured is history, not news).
func newReleases(tags []bisect.Release, past []history.Measurement) []bisect.Release {
	measured := map[string]bool{}
	for _, m := range past {
		measured[m.Tag] = true
	}
	var out []bisect.Release
	for _, r := range tags {
		if measured[r.Tag] {
			break // tags are newest first: the rest is older
		}
		out = append(out, r)
	}
	return out
}

func tagNames(rs []bisect.Release) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Tag)
	}
	return out
}

func incidentOf(i history.Incident) *incidentJSON {
	return &incidentJSON{ID: i.ID, LastGood: i.LastGood, FirstBad: i.FirstBadTag, Result: i.Result, Commit: i.FirstBad, Subject: i.Subject,
		StateDir: i.StateDir, ClosedTag: i.ClosedTag}
}

func describeCulprit(i history.Incident) string {
	switch {
	case i.Result == "found":
		return fmt.Sprintf("first bad commit %s %q", short(i.FirstBad), i.Subject)
	case i.Result == "":
		return "not bisected"
	}
	return "bisection " + i.Result
}

// lockNightly makes sure one nightly run per machine runs at a time; the
// lock file says who holds it.
func lockNightly(dir string) (func(), error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("another kbisect nightly for this machine is running (%s): %s; let it finish", path, strings.TrimSpace(string(holder)))
	}
	host, _ := os.Hostname()
	_ = f.Truncate(0)
	fmt.Fprintf(f, "pid %d on %s since %s\n", os.Getpid(), host, time.Now().Format(time.RFC3339))
	return func() {
		_ = f.Truncate(0)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
