// Package simulate plans a bisection before a night is spent on it: the
// real search, rule and confirmation driven against a noise model in
// simulated time (no builds, no SSH), thousands of bisections a minute,
// so a user learns how often each strategy names the right commit on
// this machine's noise and what it costs in boots and hours. The noise
// model can be learned from real boots of a good and a bad kernel (Learn).
//
// It imports culprit (the search it runs, and its fit of the noise),
// noise (the rule it compares with), internal/simnoise (the noise it
// draws) and nothing else of kbisect.
package simulate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"kbisect/internal/simnoise"
	"kbisect/noise"
)

// Costs are what the lab spends, in seconds: a build, a boot, a sample.
type Costs struct {
	Build  float64 `json:"build"`
	Boot   float64 `json:"boot"`
	Sample float64 `json:"sample"`
}

// Config is one simulation: the range, the two kinds of kernel and the
// noise around them, how each commit is sampled, and what things cost.
type Config struct {
	Commits int
	Runs    int
	Seed    uint64
	// Good and Bad are the medians of a sample on a good and a bad
	// kernel, in the metric's unit (ns for times); higher is worse.
	Good, Bad float64
	// Kind is the metric's kind (noise.KindTime, …), for the rule.
	Kind  string
	Noise simnoise.Model
	// Shape is the range's beyond a line of commits that all build and
	// revert: merges, commits that do not build, reverts that do not
	// apply. Only kbisect's engine bisects it.
	Shape Shape
	// FirstStep, when set, makes two steps of the regression: the
	// culprit takes a kernel from Good to FirstStep, a later commit
	// (drawn after it) from FirstStep on to Bad — a regression another
	// adds to, or (FirstStep beyond Bad) one a later commit partly
	// fixes. The answer is right when it names the first.
	FirstStep float64
	// Threshold is the absolute threshold of the rule and the plain
	// bisections (default: halfway on a log scale). Given, it is also a
	// job's absolute threshold to kbisect's engine, as in run: calibration
	// ends not reproduced when no boot of the bad endpoint is beyond it,
	// or every boot of the good one is.
	Threshold float64
	halfway   bool // Threshold was not given
	// MinSamples and MaxSamples bound a boot's samples (default 3 and
	// 10). When MinSamples is not given, the engine's search boots may
	// start with one sample (culprit.Options.FromOne), as a job's run
	// does when verdict.samples.min is left to kbisect.
	MinSamples, MaxSamples int
	minDefault             bool
	Confidence             float64
	MaxBoots               int
	Costs                  Costs
	// Strategies to run, by name (nil: all).
	Strategies []string
	// Machines is how many machines kbisect's engine boots at once (0 or
	// 1: one), into one posterior; MachineSpread the log-normal spread of
	// their levels (each machine's factor on every kernel's level).
	Machines      int
	MachineSpread float64
	// Exec simulates run --exec on a pass/fail test instead of boots: a
	// good commit's run fails with FailGood, a bad one's with FailBad;
	// kbisect is run --exec --confidence, git-bisect one run a step.
	// MaxRuns is kbisect's budget of runs (0: its default).
	Exec              bool
	FailGood, FailBad float64
	MaxRuns           int
	// predict records on each boot of the engine what a run with that
	// many build slots builds ahead while it is measured
	// (culprit.Search.Ahead; 0: nothing): the speed benchmark prices it,
	// a plain simulation spares the cost.
	predict int
}

// Validate fills the defaults and says what cannot be simulated.
func (c *Config) Validate() error {
	if c.Commits == 0 {
		c.Commits = 8192
	}
	if c.Runs == 0 {
		c.Runs = 1000
	}
	if c.MinSamples == 0 {
		c.MinSamples, c.minDefault = 3, true
	}
	if c.MaxSamples == 0 {
		c.MaxSamples = 10
	}
	if c.Confidence == 0 {
		c.Confidence = 0.99
	}
	if c.Costs == (Costs{}) {
		c.Costs = Costs{Build: 600, Boot: 120, Sample: 60}
	}
	if c.Kind == "" {
		c.Kind = noise.KindTime
	}
	if c.Exec {
		return c.validateExec()
	}
	if c.Threshold == 0 {
		c.Threshold, c.halfway = math.Sqrt(c.Good*c.Bad), true
	}
	switch {
	case c.Commits < 1 || c.Commits > 1<<20:
		return fmt.Errorf("--commits %d: simulate 1 to %d commits", c.Commits, 1<<20)
	case c.Runs < 1:
		return fmt.Errorf("--runs %d: simulate at least one bisection", c.Runs)
	case !(c.Good > 0) || math.IsInf(c.Bad, 0) || !(c.Bad > c.Good || (c.Bad == c.Good && c.Noise.HasSpikesBad && c.Noise.SpikesBad > c.Noise.Spikes)):
		return fmt.Errorf("--good %g, --bad %g: the bad kernel's samples must be larger than the good one's, both positive (or as large, with --spikes-bad above --spikes)", c.Good, c.Bad)
	case c.MinSamples < 1 || c.MaxSamples < c.MinSamples:
		return fmt.Errorf("samples %d to %d: at least 1, the smaller first", c.MinSamples, c.MaxSamples)
	case !(c.Confidence > 0.5 && c.Confidence < 1):
		return fmt.Errorf("--confidence %g is not between 0.5 and 1", c.Confidence)
	case c.Costs.Build < 0 || c.Costs.Boot < 0 || c.Costs.Sample < 0:
		return errors.New("costs cannot be negative")
	}
	if err := c.Noise.Validate(); err != nil {
		return err
	}
	if err := c.validateShape(); err != nil {
		return err
	}
	if err := c.validateMachines(); err != nil {
		return err
	}
	if c.FirstStep != 0 && (!(c.FirstStep > 0) || math.IsInf(c.FirstStep, 0) || c.FirstStep == c.Good || c.FirstStep == c.Bad || !c.Shape.none()) {
		return fmt.Errorf("--first-step %g: a level other than --good's and --bad's, on a line of commits (no --merges, --broken or --no-revert)", c.FirstStep)
	}
	for _, name := range c.Strategies {
		if c.strategyNamed(name) == nil {
			return fmt.Errorf("no strategy %q; the strategies are kbisect, rule, git-bisect and median-10", name)
		}
	}
	return nil
}

// validateShape checks the range's shape: shares below 1 (a range of
// commits none of which builds has nothing to bisect), and kbisect's
// engine alone (the default) — the others bisect a line.
func (c *Config) validateShape() error {
	for _, f := range []struct {
		flag string
		v    float64
	}{{"--merges", c.Shape.Merges}, {"--broken", c.Shape.Broken}, {"--no-revert", c.Shape.NoRevert}} {
		if !(f.v >= 0 && f.v < 1) {
			return fmt.Errorf("%s %g: a share of the commits below 100%%", f.flag, f.v)
		}
	}
	if c.Shape.none() {
		return nil
	}
	if c.Strategies == nil {
		c.Strategies = []string{"kbisect"}
	}
	for _, name := range c.Strategies {
		if name != "kbisect" {
			return fmt.Errorf("--strategies %s: with --merges, --broken or --no-revert only kbisect's engine bisects the range (the others bisect a line of commits that all build)", name)
		}
	}
	return nil
}

// validateMachines checks a pool of machines: kbisect's engine alone
// (the default with several) boots on more than one.
func (c *Config) validateMachines() error {
	switch {
	case c.Machines < 0 || c.Machines > 64:
		return fmt.Errorf("--machines %d: simulate 1 to 64 machines", c.Machines)
	case !(c.MachineSpread >= 0 && c.MachineSpread <= 2):
		return fmt.Errorf("--machine-spread %g: a log-normal spread of the machines' levels, 0 to 2", c.MachineSpread)
	case c.Machines <= 1:
		return nil
	}
	if c.Strategies == nil {
		c.Strategies = []string{"kbisect"}
	}
	for _, name := range c.Strategies {
		if name != "kbisect" {
			return fmt.Errorf("--strategies %s: with --machines %d only kbisect's engine boots on several machines", name, c.Machines)
		}
	}
	return nil
}

func (c *Config) validateExec() error {
	if c.Machines > 1 {
		return fmt.Errorf("--machines %d: --exec simulates one test at a time", c.Machines)
	}
	if !c.Shape.none() {
		return errors.New("--exec simulates a line of commits: --merges, --broken and --no-revert are for boots")
	}
	switch {
	case c.Commits < 1 || c.Commits > 1<<20:
		return fmt.Errorf("--commits %d: simulate 1 to %d commits", c.Commits, 1<<20)
	case c.Runs < 1:
		return fmt.Errorf("--runs %d: simulate at least one bisection", c.Runs)
	case !(c.FailGood >= 0 && c.FailGood < 1) || !(c.FailBad > c.FailGood && c.FailBad <= 1):
		return fmt.Errorf("--fail-good %g%%, --fail-bad %g%%: a bad commit must fail more often than a good one, at most always", 100*c.FailGood, 100*c.FailBad)
	case !(c.Confidence > 0.5 && c.Confidence < 1):
		return fmt.Errorf("--confidence %g is not between 0.5 and 1", c.Confidence)
	case c.MaxRuns < 0:
		return fmt.Errorf("--max-runs %d: give a budget of runs, or 0 for the default", c.MaxRuns)
	}
	for _, name := range c.Strategies {
		if c.strategyNamed(name) == nil {
			return fmt.Errorf("no strategy %q with --exec; the strategies are kbisect and git-bisect", name)
		}
	}
	return nil
}

func (c *Config) strategyNamed(name string) *strategy {
	list := strategies
	if c.Exec {
		list = execStrategies
	}
	for i := range list {
		if list[i].name == name {
			return &list[i]
		}
	}
	return nil
}

// Result is what every strategy did over the runs. Counts are integers;
// means are per bisection.
type Result struct {
	Runs      int     `json:"runs"`
	Commits   int     `json:"commits"`
	Seed      uint64  `json:"seed"`
	Good      float64 `json:"good"`
	Bad       float64 `json:"bad"`
	Kind      string  `json:"kind"`
	Threshold float64 `json:"threshold"`
	Noise     string  `json:"noise"`
	// Merges, Broken and NoRevert are the range's shape (Config.Shape).
	Merges   float64 `json:"merges,omitempty"`
	Broken   float64 `json:"broken,omitempty"`
	NoRevert float64 `json:"no_revert,omitempty"`
	// FirstStep is the level of a regression's first step (Config).
	FirstStep float64 `json:"first_step,omitempty"`
	// Machines and MachineSpread are the pool's (Config), when several.
	Machines      int     `json:"machines,omitempty"`
	MachineSpread float64 `json:"machine_spread,omitempty"`
	MinSamples    int     `json:"min_samples"`
	// SearchFromOne says the engine's search boots start with one sample
	// where calibration finds one decisive (MinSamples was not given).
	SearchFromOne bool `json:"search_from_one"`
	MaxSamples    int  `json:"max_samples"`
	// Exec says the runs were of a pass/fail test (run --exec), good
	// commits failing FailGood of their runs and bad ones FailBad.
	Exec       bool             `json:"exec,omitempty"`
	FailGood   float64          `json:"fail_good,omitempty"`
	FailBad    float64          `json:"fail_bad,omitempty"`
	Confidence float64          `json:"confidence"`
	Costs      Costs            `json:"costs"`
	Strategies []StrategyResult `json:"strategies"`
}

// StrategyResult is one strategy's tally.
type StrategyResult struct {
	Name          string  `json:"name"`
	About         string  `json:"about"`
	Right         int     `json:"right"`
	WrongFound    int     `json:"wrong_found"`
	Inconclusive  int     `json:"inconclusive"`
	NotReproduced int     `json:"not_reproduced"`
	MeanBoots     float64 `json:"mean_boots"`
	MeanBuilds    float64 `json:"mean_builds"`
	MeanSamples   float64 `json:"mean_samples"`
	MeanHours     float64 `json:"mean_hours"`
	// P95Boots is the 95th percentile of the boots of one bisection.
	P95Boots int `json:"p95_boots"`
}

// Run simulates cfg.Runs bisections with every strategy. Each run draws
// its culprit from the seed; each strategy meets the same culprit with
// its own stream of noise, so runs can be repeated and compared one by
// one. done, when set, hears how many runs are finished.
func Run(ctx context.Context, cfg Config, done func(int)) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	picked := strategies
	if cfg.Exec {
		picked = execStrategies
	}
	if cfg.Strategies != nil {
		picked = nil
		for _, name := range cfg.Strategies {
			picked = append(picked, *cfg.strategyNamed(name))
		}
	}
	outs := make([][]outcome, len(picked))
	costs := make([][]spent, len(picked))
	truth := make([]int, cfg.Runs)
	for i := range picked {
		outs[i], costs[i] = make([]outcome, cfg.Runs), make([]spent, cfg.Runs)
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	finished := 0
	var failed error // a history that could not be drawn
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for run := range jobs {
				culprit := rand.New(rand.NewPCG(cfg.Seed, uint64(run))).IntN(cfg.Commits)
				var hist *history
				if !cfg.Shape.none() {
					h, err := newHistory(cfg.Commits, cfg.Shape, culprit, rand.New(rand.NewPCG(cfg.Seed^0x5851f42d4c957f2d, uint64(run))))
					if err != nil {
						mu.Lock()
						failed = err
						mu.Unlock()
						continue
					}
					hist, culprit = h, h.culprit
				}
				truth[run] = culprit
				later := 0
				if cfg.FirstStep > 0 && culprit < cfg.Commits-1 {
					later = culprit + 1 + rand.New(rand.NewPCG(cfg.Seed^0x2545f4914f6cdd1d, uint64(run))).IntN(cfg.Commits-1-culprit)
				}
				for i, st := range picked {
					l := newLab(&cfg, culprit, rand.New(rand.NewPCG(cfg.Seed^0x9e3779b97f4a7c15, uint64(run)*64+uint64(i))))
					l.hist, l.later, l.middle = hist, later, cfg.FirstStep
					l.machines = rand.New(rand.NewPCG(cfg.Seed^0x6a09e667f3bcc908, uint64(run)))
					outs[i][run] = st.run(&cfg, l)
					costs[i][run] = l.spent
				}
				mu.Lock()
				finished++
				if done != nil {
					done(finished)
				}
				mu.Unlock()
			}
		}()
	}
	var err error
feed:
	for run := 0; run < cfg.Runs; run++ {
		select {
		case jobs <- run:
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err == nil {
		err = failed
	}
	if err != nil {
		return nil, err
	}
	res := &Result{Runs: cfg.Runs, Commits: cfg.Commits, Seed: cfg.Seed, Good: cfg.Good, Bad: cfg.Bad, Kind: cfg.Kind, Threshold: noise.Tidy(cfg.Kind, cfg.Threshold),
		Noise: cfg.Noise.String(), Merges: cfg.Shape.Merges, Broken: cfg.Shape.Broken, NoRevert: cfg.Shape.NoRevert, FirstStep: cfg.FirstStep, Machines: cfg.Machines, MachineSpread: cfg.MachineSpread, MinSamples: cfg.MinSamples, SearchFromOne: cfg.minDefault, MaxSamples: cfg.MaxSamples, Confidence: cfg.Confidence, Costs: cfg.Costs,
		Exec: cfg.Exec, FailGood: cfg.FailGood, FailBad: cfg.FailBad}
	for i, st := range picked {
		res.Strategies = append(res.Strategies, tally(st, outs[i], costs[i], truth))
	}
	return res, nil
}

func tally(st strategy, outs []outcome, costs []spent, truth []int) StrategyResult {
	r := StrategyResult{Name: st.name, About: st.about}
	boots := make([]int, len(outs))
	for run, o := range outs {
		switch {
		case o.kind == "found" && o.culprit == truth[run]:
			r.Right++
		case o.kind == "found":
			r.WrongFound++
		case o.kind == "inconclusive":
			r.Inconclusive++
		default:
			r.NotReproduced++
		}
		c := costs[run]
		boots[run] = c.boots
		r.MeanBoots += float64(c.boots)
		r.MeanBuilds += float64(c.builds)
		r.MeanSamples += float64(c.samples)
		if c.wall > 0 {
			r.MeanHours += c.wall / 3600
		} else {
			r.MeanHours += c.seconds / 3600
		}
	}
	n := float64(len(outs))
	r.MeanBoots, r.MeanBuilds, r.MeanSamples, r.MeanHours = noise.Significant(r.MeanBoots/n, 4), noise.Significant(r.MeanBuilds/n, 4),
		noise.Significant(r.MeanSamples/n, 4), noise.Significant(r.MeanHours/n, 4)
	r.P95Boots = percentile(boots, 0.95)
	return r
}

func percentile(xs []int, p float64) int {
	s := append([]int(nil), xs...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[int(math.Ceil(p*float64(len(s))))-1]
}
