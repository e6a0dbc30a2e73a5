package run

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/culprit"
	"kbisect/internal/commitid"
	"kbisect/lab"
	"kbisect/noise"
	"kbisect/progress"
	"kbisect/verdict"
	"kbisect/worktree"
)

// posteriorRun is the posterior search of one run --job: the range as a
// DAG, the journal every boot goes to before the next, the model learned
// from the endpoints' boots, and the search.
type posteriorRun struct {
	r       *jobRun
	pipe    *lab.Pipeline
	rng     *commitRange
	dag     *culprit.DAG
	index   map[string]int
	journal *lab.SearchJournal
	rule    noise.Rule
	search  *culprit.Search
	// reverts are the bad endpoint's kernels with a commit reverted, by
	// the commit's index, once made.
	reverts map[int]string
	// making are the reverts being made (or made), each once, in the
	// background when asked for ahead; derives waits for them.
	making  map[int]*revertJob
	derives sync.WaitGroup
	// plans counts planAhead's plans: a revert made after the plan that
	// asked for it is queued only if no other plan came since.
	plans atomic.Int64
	// ahead are the commits (by index) whose kernels were queued to build
	// during calibration: the search weighs no build for them;
	// firstTried says the first commit was predicted (once).
	ahead      []int
	firstTried bool
	goods      [][]float64
	bads       [][]float64
	cal        *lab.Calibration
}

// searchPosterior calibrates on the endpoints' boots and searches the
// range for the first bad commit until one reaches the confidence,
// confirmed, or the budget runs out. It resumes from the journal.
func (r *jobRun) searchPosterior(ctx context.Context) (bisect.Result, *lab.Calibration, *lab.SearchSummary, error) {
	p := &posteriorRun{r: r, pipe: r.pipe, index: map[string]int{}, reverts: map[int]string{}, making: map[int]*revertJob{}}
	res := bisect.Result{Kind: bisect.Aborted}
	var err error
	if p.journal, err = lab.OpenSearchJournal(r.stateDir); err != nil {
		return res, nil, nil, err
	}
	defer p.journal.Close()
	defer p.derives.Wait()
	if p.rule, err = lab.Rule(r.job, nil, nil); err != nil {
		return res, nil, nil, err
	}
	model, reason, err := p.calibrate(ctx)
	if err != nil {
		return res, p.cal, nil, err
	}
	if model == nil {
		res.Kind, res.Reason = bisect.NotReproduced, reason
		return res, p.cal, nil, nil
	}
	if err := p.openRange(); err != nil {
		var empty *emptyRange
		if errors.As(err, &empty) {
			res.Kind, res.Reason = bisect.NotReproduced, err.Error()
			return res, p.cal, nil, nil
		}
		return res, p.cal, nil, err
	}
	r.ev.line("calibrated: %s", reason)
	if p.search, err = p.newSearch(*model); err != nil {
		return res, p.cal, nil, err
	}
	if _, why := p.search.Least(); why != "" {
		r.ev.line("%s", why)
	}
	for _, i := range p.ahead {
		p.search.Built(i)
	}
	c := p.costs()
	p.search.SetCosts(c)
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)).Round(time.Second) }
	r.ev.line("costs as the lab measured them so far: a build %s, a boot %s, a sample %s", sec(c.Build), sec(c.Boot), sec(c.Sample))
	if err := p.replay(); err != nil {
		return res, p.cal, nil, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return res, p.cal, p.summary(nil), err
		}
		step := p.search.Next()
		if step.Kind != culprit.Measure {
			res = p.result(step)
			sum := p.summary(&step)
			if err := lab.WriteSearchSummary(r.stateDir, sum); err != nil {
				return res, p.cal, sum, err
			}
			return res, p.cal, sum, p.gather(res)
		}
		if err := p.boot(ctx, step); err != nil {
			return res, p.cal, p.summary(nil), err
		}
		if err := lab.WriteSearchSummary(r.stateDir, p.summary(nil)); err != nil {
			return res, p.cal, nil, err
		}
	}
}

// openRange lists the range's commits, parents first.
func (p *posteriorRun) openRange() error {
	if p.rng != nil {
		return nil // opened during calibration, to build the first commit ahead
	}
	// The session's ends: the start's, narrowed by verdicts a --replay
	// log gave; not by those the search itself logged when it ended.
	var records []bisect.Record
	for _, rec := range p.r.log.Records() {
		if rec.Event != bisect.EventVerdict || rec.Source != "posterior" {
			records = append(records, rec)
		}
	}
	sess, _, err := bisect.Restore(p.r.g, records)
	if err != nil {
		return err
	}
	bad, goods := sess.Bad(), sess.Goods()
	for _, g := range goods {
		if ok, err := p.r.g.IsAncestor(bad, g); err == nil && ok {
			return &emptyRange{bad: p.r.start.Bad}
		}
	}
	commits, parents, err := p.r.g.RangeCommits(bad, goods, p.r.start.FirstParent)
	if err != nil {
		return err
	}
	if len(commits) == 0 {
		return &emptyRange{bad: p.r.start.Bad}
	}
	if p.dag, err = culprit.NewDAG(parents); err != nil {
		return err
	}
	p.rng = &commitRange{Commits: commits, Parents: parents}
	for i, h := range commits {
		p.index[h.String()] = i
	}
	return nil
}

// commitRange is the range's commits, parents first, the bad revision
// last, and each one's parents in the range as indexes.
type commitRange struct {
	Commits []plumbing.Hash
	Parents [][]int
}

// emptyRange is a bad revision a good one contains: nothing to search.
type emptyRange struct{ bad string }

func (e *emptyRange) Error() string {
	return fmt.Sprintf("%s was both good and bad: no commit is reachable from the bad revision that is not reachable from a good one", e.bad)
}

// costs are what a build, a boot and a sample cost on this lab: what the
// journal's boots measured, and guesses from the job until they have.
func (p *posteriorRun) costs() culprit.Costs {
	return measuredCosts(p.journal.Records(), p.guessedCosts())
}

// guessedCosts are the costs before any boot measured them: 600 s a
// build, boot.settle plus 90 s a boot, the workload's duration plus 5 s a
// sample.
func (p *posteriorRun) guessedCosts() culprit.Costs {
	job := p.r.job
	sample := math.Max(job.Workload.Duration.D().Seconds(), 1) + 5
	return culprit.Costs{Build: 600, Boot: math.Max(job.Boot.Settle.D().Seconds(), 0) + 90, Sample: sample}
}

// calibrationCosts are the costs as calibration's boots measured them: what
// the search starts from, and decides its boots' least samples by, alike
// on a resumed run (SetCosts brings in the search's own boots after).
func (p *posteriorRun) calibrationCosts() culprit.Costs {
	var cal []lab.SearchRecord
	for _, rec := range p.journal.Records() {
		if rec.Kind == lab.SearchGood || rec.Kind == lab.SearchBad {
			cal = append(cal, rec)
		}
	}
	return measuredCosts(cal, p.guessedCosts())
}

// measuredCosts learns the costs from journaled boots: a build's from the
// builds that ran (not cached), a boot's from each boot's time less its
// build and its samples (at the guessed cost of a sample, which the
// workload's duration sets). Medians, so one slow boot does not steer.
func measuredCosts(records []lab.SearchRecord, guess culprit.Costs) culprit.Costs {
	var builds, boots []float64
	for _, rec := range records {
		if rec.BuildSeconds > 0 {
			builds = append(builds, rec.BuildSeconds)
		}
		if rec.Kind == lab.SearchSkip || len(rec.Values) == 0 || rec.Seconds <= 0 {
			continue
		}
		boots = append(boots, rec.Seconds-rec.BuildSeconds-float64(len(rec.Values))*guess.Sample)
	}
	c := guess
	if len(builds) > 0 {
		c.Build = math.Max(noise.Median(builds), 1)
	}
	if len(boots) > 0 {
		c.Boot = math.Max(noise.Median(boots), 1)
	}
	return c
}

// badness maps a boot's values to what the model compares: positive,
// larger when worse.
func (p *posteriorRun) badness(values []float64) []float64 {
	out := make([]float64, len(values))
	for i, x := range values {
		out[i] = p.rule.BadnessOf(x)
	}
	return out
}

func (p *posteriorRun) record(kind, commit, built string, ev *lab.Evidence) lab.SearchRecord {
	rec := lab.SearchRecord{Kind: kind, Commit: commit, Built: built, Values: ev.Values, Release: ev.Release, Reason: ev.Reason, Seconds: ev.Seconds}
	if ev.Build != nil && !ev.Build.Cached {
		rec.BuildSeconds = ev.Build.Seconds
	}
	if len(ev.Boots) > 0 {
		rec.BootID = ev.Boots[len(ev.Boots)-1].BootID
	}
	return rec
}

// replay takes the journal's boots back into the search.
func (p *posteriorRun) replay() error {
	for _, rec := range p.journal.Records() {
		if rec.Kind != lab.SearchBoot && rec.Kind != lab.SearchSkip {
			continue
		}
		i, ok := p.index[rec.Commit]
		if !ok {
			return fmt.Errorf("the journal names %s, which is not in the range: give another --state", commitid.Short(rec.Commit))
		}
		if rec.Reverted && rec.Built != "" {
			p.reverts[i] = rec.Built
		}
		p.search.Replay(culprit.Observation{Commit: i, Reverted: rec.Reverted, Confirming: rec.Confirming, Skipped: rec.Kind == lab.SearchSkip, Samples: p.badness(rec.Values)})
	}
	return nil
}

// boot measures what the step asks for, once, and journals it before the
// search takes it in.
func (p *posteriorRun) boot(ctx context.Context, step culprit.Step) error {
	r := p.r
	commit := p.rng.Commits[step.Commit].String()
	built := commit
	if step.Reverted {
		var err error
		if built, err = p.reverted(ctx, step.Commit); err != nil {
			var ce *worktree.ConflictError
			if !errors.As(err, &ce) {
				return err
			}
			r.ev.line("%s does not revert on the bad endpoint (%v): confirming without it", commitid.Short(commit), ce)
			if err := p.journal.Append(lab.SearchRecord{Kind: lab.SearchSkip, Commit: commit, Reverted: true, Confirming: step.Confirming, Reason: ce.Error()}); err != nil {
				return err
			}
			p.search.Skip(step)
			return nil
		}
	}
	lead := p.search.Leading(1)[0]
	what := fmt.Sprintf("boot %d of this commit", p.search.BootsOf(step.Commit)+1)
	if step.Reverted {
		what = fmt.Sprintf("the bad endpoint with %s reverted", commitid.Short(commit))
	}
	if step.Confirming {
		what += ", confirming"
	}
	r.ev.sink.Emit(progress.Event{Kind: progress.Testing, Commit: built, Subject: r.ev.subject(commit),
		Text: fmt.Sprintf("Measuring %s (%d boots so far; leading: %s at %s)", what, p.search.Boots(), commitid.Short(p.rng.Commits[lead.Commit].String()), culprit.Format(lead.Probability))})
	p.planAhead(ctx, built, step)
	began := time.Now()
	sub := fmt.Sprintf("boot-%d", p.search.Boots()+1)
	ev, err := p.pipe.BootOnce(ctx, built, sub, func(v []float64) bool {
		return p.search.More(p.badness(v))
	})
	if err != nil {
		return err
	}
	if len(ev.Values) > 0 {
		if err := lab.SaveBoot(r.stateDir, sub, ev); err != nil {
			return err
		}
	}
	if len(ev.Values) == 0 || ev.Failure != nil {
		// A kernel that failed after some samples (it hung the host
		// twice in the middle of the workload) is a failure, not a boot
		// measured by its first samples.
		if err := p.journal.Append(lab.SearchRecord{Kind: lab.SearchSkip, Commit: commit, Reverted: step.Reverted, Confirming: step.Confirming, Built: built, Reason: ev.Reason, Failure: ev.Failure, Seconds: ev.Seconds}); err != nil {
			return err
		}
		p.search.Skip(step)
		r.ev.sink.Emit(progress.Event{Kind: progress.Tested, Commit: built, Verdict: verdict.Skip, Text: ev.Reason, Elapsed: time.Since(began)})
		return nil
	}
	rec := p.record(lab.SearchBoot, commit, builtIf(step.Reverted, built), ev)
	rec.Reverted, rec.Confirming, rec.Sub = step.Reverted, step.Confirming, sub
	if err := p.journal.Append(rec); err != nil {
		return err
	}
	lam := p.search.Observe(step, p.badness(ev.Values))
	p.search.SetCosts(p.costs())
	v := verdict.Good
	if lam > 0 {
		v = verdict.Bad
	}
	side := "good"
	if lam > 0 {
		side = "bad"
	}
	r.ev.sink.Emit(progress.Event{Kind: progress.Tested, Commit: built, Verdict: v, Elapsed: time.Since(began),
		Text: fmt.Sprintf("this boot: median %s, %.0f:1 for %s", noise.FormatValue(p.rule.MetricKind, noise.Median(ev.Values)), math.Exp(math.Abs(lam)), side)})
	return nil
}

func builtIf(reverted bool, built string) string {
	if reverted {
		return built
	}
	return ""
}

// newSearch is the search of the range on model, the bad endpoint's
// calibration boots its first evidence.
func (p *posteriorRun) newSearch(model culprit.Model) (*culprit.Search, error) {
	v := p.r.job.Verdict
	s, err := culprit.New(p.dag, model, culprit.Options{Confidence: p.r.job.SearchConfidence(), MaxBoots: v.MaxBoots,
		MinSamples: v.Samples.Min, MaxSamples: v.Samples.Max, FromOne: p.r.job.Defaulted("verdict.samples.min"),
		Revert: true, Costs: p.calibrationCosts(), GoodBoots: p.goods})
	if err != nil {
		return nil, err
	}
	last := len(p.rng.Commits) - 1
	for _, b := range p.bads {
		s.ObserveAt(last, b)
	}
	return s, nil
}

// revertJob is the making of the bad endpoint with one commit reverted:
// hash and err are set before done is closed.
type revertJob struct {
	done chan struct{}
	hash string
	err  error
}

// startRevert starts making (once) the bad endpoint with commit i
// reverted, in the background: a git worktree of the whole tree, which
// the lab host does not wait for when it is made ahead.
func (p *posteriorRun) startRevert(ctx context.Context, i int) *revertJob {
	if j := p.making[i]; j != nil {
		return j
	}
	j := &revertJob{done: make(chan struct{})}
	p.making[i] = j
	if h, ok := p.reverts[i]; ok {
		j.hash = h
		close(j.done)
		return j
	}
	change := worktree.Change{Revert: p.rng.Commits[i].String()}
	if len(p.rng.Parents[i]) > 1 {
		change.Mainline = 1
	}
	tree, bad := string(p.r.job.Build.Tree), p.r.start.Bad
	p.derives.Add(1)
	go func() {
		defer p.derives.Done()
		defer close(j.done)
		j.hash, j.err = worktree.Derive(ctx, tree, bad, change)
	}()
	return j
}

// reverted makes (once) the bad endpoint with commit i reverted.
func (p *posteriorRun) reverted(ctx context.Context, i int) (string, error) {
	j := p.startRevert(ctx, i)
	select {
	case <-j.done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if j.err != nil {
		delete(p.making, i) // asked for again, tried again
		return "", j.err
	}
	p.reverts[i] = j.hash
	return j.hash, nil
}

// planAhead queues for building, while built is measured, the kernels
// the search asks for next if this boot measures like a good kernel or
// like a bad one (and, with a build server's slots to spare, after that:
// culprit.Search.Ahead), nearest first; the builds start once built's own
// kernel is built. A revert of the bad endpoint the next verdict may ask
// for is made in the background (the same commit it would be when asked
// for) and queued once made, if no newer plan came. The search counts a
// kernel queued here as built: its next boot's cost is a boot's.
func (p *posteriorRun) planAhead(ctx context.Context, built string, step culprit.Step) {
	if p.r.ahead == nil {
		return
	}
	plan := p.plans.Add(1)
	var next []string
	for k, n := range p.search.Ahead(step, p.r.ahead.Width()) {
		if !n.Reverted {
			next = append(next, p.rng.Commits[n.Commit].String())
			p.search.Built(n.Commit)
			continue
		}
		if k >= 2 {
			continue // a verdict further: not worth a worktree yet
		}
		j := p.startRevert(ctx, n.Commit)
		select {
		case <-j.done:
			if j.err == nil {
				next = append(next, j.hash)
			}
		default:
			p.derives.Add(1)
			go func() {
				defer p.derives.Done()
				<-j.done
				if j.err == nil && p.plans.Load() == plan {
					p.r.ahead.Queue(j.hash)
				}
			}()
		}
	}
	p.r.ahead.Expect(built, next...)
}
