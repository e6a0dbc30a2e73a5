package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"kbisect/configs"
	"kbisect/internal/simnoise"
	"kbisect/noise"
	"kbisect/progress"
	"kbisect/report"
	"kbisect/run"
	"kbisect/simulate"
)

func simulateCommand() *cli.Command {
	return &cli.Command{
		Name:  "simulate",
		Usage: "plan a bisection: how often each strategy finds the right commit on this noise, and what it costs",
		Description: `simulate runs thousands of bisections in simulated time — no builds, no
SSH — with kbisect's real search, rule and confirmation against a model of
the machine's noise, and prints per strategy how often it named the right
commit, a wrong one (said "found" and was wrong), or none (inconclusive,
not reproduced), and what that cost in boots, builds, samples and hours.

The noise model: samples of good kernels scatter around --good, of bad
ones around --bad; --spread is the log-normal spread within a boot,
--boot-spread the spread of a boot's level from boot to boot; --bad-boots
is the share of boots that land at the other side's level; --stray-boots
RATE:A-B% the share that lands partway, A to B of the way there; --spikes
RATE:MIN-MAXx multiplies that share of samples by a factor between MIN and
MAX; --flips draws that share of samples from the other side.

The strategies: kbisect (the engine run --job uses); rule (the sequential
rule per commit kbisect used before, with git's bisection and its
5-round confirmation); git-bisect (one sample per commit against the
threshold); median-10 (the median of 10 samples of one boot).

With --job, the job's samples, confidence and absolute threshold are used.
With --from-state, the levels and spreads are learned from a run's state
directory — its endpoints' boots, as calibration measured them — and the
flags given say the rest (boots on the wrong side, spikes and flips cannot
be learned from a few boots: give them).

EXAMPLES
   kbisect simulate --good 7us --bad 15us --spread 0.2 --spikes 5%:2-20x
   kbisect simulate --good 7us --bad 15us --spread 0.3 --bad-boots 5% --runs 2000 --json
   kbisect simulate --job configs/system-0.yaml --good 3us --bad 49ms --commits 1200
   kbisect simulate --from-state ~/linux/.git/kbisect/run-1a2b3c --bad-boots 5% --commits 3000`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "job", Usage: "take samples, confidence and threshold from this job file"},
			&cli.StringFlag{Name: "from-state", Usage: "learn the levels and spreads from a run's state directory (its endpoints' boots)"},
			&cli.IntFlag{Name: "commits", Value: 8192, Usage: "commits in the range"},
			&cli.IntFlag{Name: "runs", Value: 1000, Usage: "bisections per strategy"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "which culprits and noise"},
			&cli.StringFlag{Name: "good", Usage: "a good kernel's typical sample: 7us, or a number"},
			&cli.StringFlag{Name: "bad", Usage: "a bad kernel's typical sample: 15us, or a number"},
			&cli.StringFlag{Name: "threshold", Usage: "the absolute threshold of the rule and plain bisections (default: halfway on a log scale)"},
			&cli.Float64Flag{Name: "spread", Value: 0.2, Usage: "log-normal spread of samples within a boot"},
			&cli.Float64Flag{Name: "boot-spread", Usage: "log-normal spread of a boot's level"},
			&cli.StringFlag{Name: "bad-boots", Value: "0%", Usage: "share of boots at the other side's level"},
			&cli.StringFlag{Name: "stray-boots", Value: "0%", Usage: "share of boots partway to the other side: 25%:20-60% (of the way)"},
			&cli.StringFlag{Name: "spikes", Value: "0%", Usage: "share and size of spikes: 5%:2-20x"},
			&cli.StringFlag{Name: "flips", Value: "0%", Usage: "share of samples drawn from the other side"},
			&cli.IntFlag{Name: "samples-min", Usage: "least samples a boot gives (default 3, or the job's)"},
			&cli.IntFlag{Name: "samples-max", Usage: "most samples a boot gives (default 10, or the job's)"},
			&cli.Float64Flag{Name: "confidence", Usage: "probability kbisect must reach to name a commit (default 0.99, or the job's)"},
			&cli.IntFlag{Name: "max-boots", Usage: "kbisect's budget of boots (default: 6 a step, plus 20)"},
			&cli.DurationFlag{Name: "build-cost", Value: 10 * time.Minute, Usage: "time to build a kernel"},
			&cli.DurationFlag{Name: "boot-cost", Value: 2 * time.Minute, Usage: "time to install and boot one"},
			&cli.DurationFlag{Name: "sample-cost", Value: time.Minute, Usage: "time to take one sample"},
			&cli.StringFlag{Name: "strategies", Usage: "comma-separated strategies to run (default: all)"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as one JSON object on stdout"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			cfg, err := simulateConfig(c)
			if err != nil {
				return err
			}
			return runSimulate(c.Context, cfg, c.Bool("json"), c.App.Writer, c.App.ErrWriter)
		},
	}
}

// simulateConfig reads the flags, and the job file when one is given.
func simulateConfig(c *cli.Context) (simulate.Config, error) {
	cfg := simulate.Config{Commits: c.Int("commits"), Runs: c.Int("runs"), Seed: c.Uint64("seed"), MaxBoots: c.Int("max-boots"),
		Costs: simulate.Costs{Build: c.Duration("build-cost").Seconds(), Boot: c.Duration("boot-cost").Seconds(), Sample: c.Duration("sample-cost").Seconds()}}
	var kind string
	var err error
	if !c.IsSet("from-state") && (!c.IsSet("good") || !c.IsSet("bad")) {
		return cfg, usagef("simulate: give --good and --bad (a good and a bad kernel's typical sample, as 7us and 15us), or --from-state DIR")
	}
	if c.IsSet("good") || c.IsSet("bad") {
		if cfg.Good, kind, err = simulateValue(c.String("good")); err != nil {
			return cfg, usagef("--good: %v", err)
		}
		badKind := ""
		if cfg.Bad, badKind, err = simulateValue(c.String("bad")); err != nil {
			return cfg, usagef("--bad: %v", err)
		}
		if badKind != kind {
			return cfg, usagef("--good %s and --bad %s: give both as times (7us) or both as numbers", c.String("good"), c.String("bad"))
		}
	}
	cfg.Kind = kind
	if t := c.String("threshold"); t != "" {
		v, tk, err := simulateValue(t)
		if err != nil || tk != kind {
			return cfg, usagef("--threshold %s: give it as --good and --bad are given", t)
		}
		cfg.Threshold = v
	}
	if path := c.String("job"); path != "" {
		job, err := configs.Open(path, c.App.ErrWriter)
		if err != nil {
			return cfg, err
		}
		cfg.MinSamples, cfg.MaxSamples, cfg.Confidence = job.Verdict.Samples.Min, job.Verdict.Samples.Max, job.Verdict.Confidence
		if th := job.Verdict.Threshold; th.Kind == configs.ThresholdTime && cfg.Threshold == 0 && kind == noise.KindTime {
			cfg.Threshold = float64(th.Time.Nanoseconds())
		}
	}
	if c.IsSet("samples-min") {
		cfg.MinSamples = c.Int("samples-min")
	}
	if c.IsSet("samples-max") {
		cfg.MaxSamples = c.Int("samples-max")
	}
	if c.IsSet("confidence") {
		cfg.Confidence = c.Float64("confidence")
	}
	m := simnoise.Model{Spread: c.Float64("spread"), BootSpread: c.Float64("boot-spread")}
	if m.BadBoots, err = simnoise.ParsePercent(c.String("bad-boots")); err != nil {
		return cfg, usagef("--bad-boots: %v", err)
	}
	if m.Strays, m.StrayMin, m.StrayMax, err = simnoise.ParseStrays(c.String("stray-boots")); err != nil {
		return cfg, usagef("--stray-boots: %v", err)
	}
	if m.Flips, err = simnoise.ParsePercent(c.String("flips")); err != nil {
		return cfg, usagef("--flips: %v", err)
	}
	if m.Spikes, m.SpikeMin, m.SpikeMax, err = simnoise.ParseSpikes(c.String("spikes")); err != nil {
		return cfg, usagef("--spikes: %v", err)
	}
	cfg.Noise = m
	if c.IsSet("from-state") {
		if err := fromState(c, &cfg); err != nil {
			return cfg, err
		}
	}
	if s := c.String("strategies"); s != "" {
		cfg.Strategies = strings.Split(s, ",")
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usagef("simulate: %v", err)
	}
	return cfg, nil
}

// simulateValue reads a typical sample: a time with its unit (in ns), or
// a plain number.
func simulateValue(s string) (float64, string, error) {
	if v, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
		return v, noise.KindNumber, nil
	}
	d, err := configs.ParseDuration(s)
	if err != nil {
		return 0, "", err
	}
	return float64(time.Duration(d).Nanoseconds()), noise.KindTime, nil
}

func runSimulate(ctx context.Context, cfg simulate.Config, asJSON bool, stdout, stderr io.Writer) error {
	view := newView(stderr)
	defer view.Emit(progress.Event{Kind: progress.Done})
	step := max(cfg.Runs/10, 1)
	res, err := simulate.Run(ctx, cfg, func(done int) {
		if done%step == 0 || done == cfg.Runs {
			view.Emit(progress.Event{Kind: progress.Note, Text: fmt.Sprintf("simulated %d of %d bisections", done, cfg.Runs)})
		}
	})
	if err != nil {
		return err
	}
	if asJSON {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	return report.WriteSimulation(stdout, res)
}

// fromState learns the levels and spreads from a run's state directory;
// flags given explicitly win.
func fromState(c *cli.Context, cfg *simulate.Config) error {
	dir := c.String("from-state")
	n, err := run.LearnNoise(dir)
	if err != nil {
		return err
	}
	if !c.IsSet("good") {
		cfg.Good = n.Good
	}
	if !c.IsSet("bad") {
		cfg.Bad = n.Bad
	}
	if !c.IsSet("spread") {
		cfg.Noise.Spread = n.Spread
	}
	if !c.IsSet("boot-spread") {
		cfg.Noise.BootSpread = n.BootSpread
	}
	cfg.Kind = noise.KindNumber
	if n.Time {
		cfg.Kind = noise.KindTime
	}
	fmt.Fprintf(c.App.ErrWriter, "kbisect: the noise model from %s: %d and %d boots of the endpoints; good %s, bad %s, spread %.2f, boot spread %.2f\n",
		dir, n.GoodBoots, n.BadBoots, noise.FormatValue(cfg.Kind, cfg.Good), noise.FormatValue(cfg.Kind, cfg.Bad), cfg.Noise.Spread, cfg.Noise.BootSpread)
	return nil
}
