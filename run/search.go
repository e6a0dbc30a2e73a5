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
	"kbisect/drive"
	"kbisect/internal/commitid"
	"kbisect/lab"
	"kbisect/noise"
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
	// stopped is why the job's threshold ended calibration ("" if it
	// did not); hookErr the first error a hook met.
	stopped string
	hookErr error
	// forecast is where the search expects to end, as the step that
	// begins now (Hooks.Before) sees it; ran is the last forecast run
	// ahead, at the search's boots ranBoots.
	forecast, ran lab.SearchForecast
	ranBoots      int
	// rangeErr is why the range could not be listed.
	rangeErr error
	// pool is the machines of a run on several (nil: one).
	pool *machinePool
	// good is the good endpoint's commit: the one given, or the older
	// release the walk back found good; walk is that walk.
	good string
	walk postWalk
}

// searchPosterior calibrates on the endpoints' boots and searches the
// range for the first bad commit until one reaches the confidence,
// confirmed, or the budget runs out: the loop of package drive, on this
// lab (posteriorRun is its machine). It resumes from the journal.
func (r *jobRun) searchPosterior(ctx context.Context) (bisect.Result, *lab.Calibration, *lab.SearchSummary, error) {
	p := &posteriorRun{r: r, pipe: r.pipe, index: map[string]int{}, reverts: map[int]string{}, making: map[int]*revertJob{}, good: r.start.Good[0]}
	for _, rec := range r.log.Records() {
		if rec.Event == bisect.EventRange && len(rec.Good) > 0 {
			p.good = rec.Good[0] // the walk back found it
		}
	}
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
	hist, err := p.history()
	if err != nil {
		return res, nil, nil, err
	}
	v := r.job.Verdict
	opt := drive.Options{
		Range: func() (*culprit.DAG, error) {
			if err := p.openRange(); err != nil {
				p.rangeErr = err
				return nil, err
			}
			return p.dag, nil
		},
		Search: culprit.Options{Confidence: r.job.SearchConfidence(), MaxBoots: v.MaxBoots,
			MinSamples: v.Samples.Min, MaxSamples: v.Samples.Max, FromOne: r.job.Defaulted("verdict.samples.min"), Revert: true},
		StartCosts:         p.calibrationCosts,
		Least:              v.Samples.Min,
		CalibrationSamples: min(max(v.Samples.Min, 5), v.Samples.Max),
		History:            hist,
		Hooks:              p.hooks(),
		Walk:               p.walkOptions(ctx),
	}
	var out drive.Result
	if len(r.machines) > 1 {
		p.pool = newMachinePool(ctx, p, r.machines, r.down)
		out, err = drive.RunPool(ctx, p.pool, opt)
		p.pool.close()
	} else {
		out, err = drive.Run(ctx, p, opt)
	}
	if err == nil {
		err = p.hookErr
	}
	switch {
	case errors.Is(err, drive.ErrRange):
		var empty *emptyRange
		if errors.As(err, &empty) {
			res.Kind, res.Reason = bisect.NotReproduced, empty.Error()
			return res, p.cal, nil, nil
		}
		return res, p.cal, nil, p.rangeErr
	case err != nil && p.search == nil:
		return res, p.cal, nil, err
	case err != nil:
		return res, p.cal, p.summary(nil), err
	case out.Search == nil:
		p.walkedNowhere(out.GoodIsBad)
		if err := p.hookErr; err != nil {
			return res, p.cal, nil, err
		}
		res.Kind, res.Reason = bisect.NotReproduced, p.cal.Reason
		return res, p.cal, nil, nil
	}
	step := out.End
	res = p.result(step)
	sum := p.summary(&step)
	if err := lab.WriteSearchSummary(r.stateDir, sum); err != nil {
		return res, p.cal, sum, err
	}
	return res, p.cal, sum, p.gather(res)
}

// hooks are what a run does beside drive's loop: its lines, the
// calibration file, building ahead, the summary after every boot, the
// costs as the lab measures them.
func (p *posteriorRun) hooks() drive.Hooks {
	r := p.r
	good, bad := r.start.Good[0], r.start.Bad
	return drive.Hooks{
		Calibrating: func(round int, provisional func() *culprit.Search) {
			if round == 0 {
				r.ev.line("calibrating on the endpoints, boot by boot: bad %s, good %s", commitid.Short(bad), commitid.Short(good))
				if r.ahead != nil {
					// The good endpoint builds while the bad one is measured.
					r.ahead.Queue(good)
				}
			}
			if r.ahead != nil && !p.firstTried {
				// The search's first commit, as the endpoints' boots so
				// far place it, builds while the rest of calibration is
				// measured.
				if s := provisional(); s != nil {
					p.firstTried = true
					p.firstAhead(s)
				}
			}
		},
		Stop: func(goods, bads [][]float64) (string, bool) {
			p.goods, p.bads = goods, bads
			var goodIsBad bool
			p.stopped, goodIsBad = p.thresholdSays(good, bad)
			return p.stopped, goodIsBad
		},
		Calibrated: func(goods, bads [][]float64, m culprit.Model, err error) {
			p.goods, p.bads = goods, bads
			p.cal = p.calibration(p.good, bad, m, err)
			if p.stopped != "" {
				p.cal.Reason = p.stopped
			}
			if s := p.walk.search; s != nil && s.Found != "" {
				p.cal.Search = s
				p.cal.Reason = fmt.Sprintf("the good endpoint %s measured as bad as the bad one; %s; %s", commitid.Short(s.Given), s.Reason, p.cal.Reason)
			}
			p.keep(lab.WriteCalibration(r.stateDir, p.cal))
		},
		Started: func(s *culprit.Search) {
			p.search = s
			r.ev.line("calibrated: %s", p.cal.Reason)
			if _, why := s.Least(); why != "" {
				r.ev.line("%s", why)
			}
			for _, i := range p.ahead {
				s.Built(i)
			}
			c := p.costs()
			s.SetCosts(c)
			sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)).Round(time.Second) }
			r.ev.line("costs as the lab measured them so far: a build %s, a boot %s, a sample %s", sec(c.Build), sec(c.Boot), sec(c.Sample))
		},
		Before: func(s *culprit.Search, _ culprit.Step) {
			// Where the search expects to end, and the boots so far,
			// summed up before the next is measured.
			p.forecastAt(s)
			p.keep(lab.WriteSearchSummary(r.stateDir, p.summary(nil)))
		},
		Costs: p.costs,
	}
}

// keep holds the first error a hook met: the next boot returns it, and
// the run stops there.
func (p *posteriorRun) keep(err error) {
	if err != nil && p.hookErr == nil {
		p.hookErr = err
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

func builtIf(reverted bool, built string) string {
	if reverted {
		return built
	}
	return ""
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

// forecastRuns is how many searches a forecast runs ahead, and
// forecastEvery how many boots pass between two (a forecast costs a few
// seconds on 8,192 commits, against the minutes a boot takes; the range
// they give is measured in simulate's TestForecastHoldsWhatTheRestTakes).
const (
	forecastRuns  = 30
	forecastEvery = 4
)

// forecastAt says where the search expects to end as its next step
// begins: run ahead every forecastEvery boots (and after a resume); in
// between, the last run ahead less the boots and the time spent since.
func (p *posteriorRun) forecastAt(s *culprit.Search) {
	now, done := time.Now().UTC(), s.Boots()-p.ranBoots
	if p.ran.Boots == 0 || done < 0 || done >= forecastEvery {
		f := s.Forecast(forecastRuns)
		p.ran = lab.SearchForecast{At: now, Boots: f.Boots, BootsLow: f.BootsLow, BootsHigh: f.BootsHigh,
			Seconds: f.Seconds, SecondsLow: f.SecondsLow, SecondsHigh: f.SecondsHigh}
		p.ranBoots, done = s.Boots(), 0
	}
	f, spent := p.ran, now.Sub(p.ran.At).Seconds()
	if p.pool != nil {
		// The search ahead is one machine's: several finish sooner.
		sc := drive.PoolShare(p.pool.live())
		f.Seconds, f.SecondsLow, f.SecondsHigh = f.Seconds*sc.Seconds, f.SecondsLow*sc.SecondsLow, f.SecondsHigh*sc.Seconds
		f.Boots, f.BootsHigh = int(math.Round(float64(f.Boots)*sc.Boots)), int(math.Ceil(float64(f.BootsHigh)*sc.Boots))
	}
	less := func(n int) int { return max(n-done, 1) }
	left := func(x float64) float64 { return math.Max(x-spent, 0) }
	p.forecast = lab.SearchForecast{At: now, Boots: less(f.Boots), BootsLow: less(f.BootsLow), BootsHigh: less(f.BootsHigh),
		Seconds: left(f.Seconds), SecondsLow: left(f.SecondsLow), SecondsHigh: left(f.SecondsHigh)}
}
