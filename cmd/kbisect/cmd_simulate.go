package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"kbisect/progress"
	"kbisect/report"
	"kbisect/run"
	"kbisect/simulate"
)

func simulateCommand() *cli.Command {
	return &cli.Command{
		Name:        "simulate",
		Usage:       "plan a bisection: how often each strategy finds the right commit on this noise, and what it costs",
		Description: helpText(simulateHelp),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "job", Usage: "take samples, confidence and threshold from this job file"},
			&cli.StringFlag{Name: "from-state", Usage: "learn the levels and spreads from a run's state directory (its endpoints' boots)"},
			&cli.StringSliceFlag{Name: "good-measure", Usage: "learn from this kbisect measure --json file, one boot of a good kernel (repeatable)"},
			&cli.StringSliceFlag{Name: "bad-measure", Usage: "learn from this kbisect measure --json file, one boot of a bad kernel (repeatable)"},
			&cli.StringFlag{Name: "from-history", Usage: "learn from the nightly's database: the measurements of --good-kernel and --bad-kernel"},
			&cli.StringSliceFlag{Name: "good-kernel", Usage: "with --from-history: a good release tag (or commit) the nightly measured (repeatable)"},
			&cli.StringSliceFlag{Name: "bad-kernel", Usage: "with --from-history: a bad release tag (or commit) the nightly measured (repeatable)"},
			&cli.IntFlag{Name: "commits", Value: 8192, Usage: "commits in the range"},
			&cli.IntFlag{Name: "runs", Value: 1000, Usage: "bisections per strategy"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "which culprits and noise"},
			&cli.StringFlag{Name: "good", Usage: "a good kernel's typical sample: 7us, or a number"},
			&cli.StringFlag{Name: "bad", Usage: "a bad kernel's typical sample: 15us, or a number"},
			&cli.StringFlag{Name: "threshold", Usage: "a job's absolute threshold: the rule's and plain bisections', and kbisect's calibration ends not reproduced by it as run's does (default: halfway on a log scale, for the rule and plain bisections only)"},
			&cli.Float64Flag{Name: "spread", DefaultText: "learned, or 0.2", Usage: "log-normal spread of samples within a boot"},
			&cli.Float64Flag{Name: "boot-spread", DefaultText: "learned, or 0", Usage: "log-normal spread of a boot's level"},
			&cli.StringFlag{Name: "bad-boots", Value: "0%", Usage: "share of boots at the other side's level"},
			&cli.StringFlag{Name: "stray-boots", Value: "0%", Usage: "share of boots partway to the other side: 25%:20-60% (of the way)"},
			&cli.StringFlag{Name: "spikes", Value: "0%", Usage: "share and size of spikes: 5%:2-20x"},
			&cli.StringFlag{Name: "flips", Value: "0%", Usage: "share of samples drawn from the other side"},
			&cli.StringFlag{Name: "drift", Value: "0%", Usage: "the machine drifts: every boot's level grows by P over the run's first BOOTS boots, and on: P:BOOTS, as in 60%:40 (60%:40:flat stops there)"},
			&cli.Float64Flag{Name: "boot-ar", Usage: "boot levels follow an AR(1) over the run's boots in order, with this coefficient (--boot-spread their spread)"},
			&cli.StringFlag{Name: "intermittent", Value: "0%", Usage: "an intermittent regression: the share of a bad kernel's boots that show it (the others measure as a good kernel's)"},
			&cli.StringFlag{Name: "spikes-bad", Usage: "a regression in how often it spikes: the bad kernel's share of spikes (--spikes is then the good kernel's, and their size)"},
			&cli.Float64Flag{Name: "sample-t", Usage: "samples scatter within a boot on a Student-t of this many degrees of freedom (--spread its scale) instead of a normal: heavier tails than kbisect's model (2: no variance)"},
			&cli.Float64Flag{Name: "boot-t", Usage: "boots' levels scatter on a Student-t of this many degrees of freedom (--boot-spread its scale) instead of a normal"},
			&cli.Float64Flag{Name: "spike-tail", Usage: "spikes' factors from a Pareto of this index, from the smallest --spikes size and cut at the largest, instead of log-uniform: most small, a few huge"},
			&cli.StringFlag{Name: "good-mode", Value: "0%", Usage: "a good kernel's boots are bimodal: this share of them measure at this factor of its level, as in 30%:1.6x"},
			&cli.StringFlag{Name: "merges", Value: "0%", Usage: "share of the mainline's commits that merge a topic branch (1-8 commits) into it (kbisect's engine only)"},
			&cli.StringFlag{Name: "broken", Value: "0%", Usage: "share of the range's commits whose kernel does not build: skipped (kbisect's engine only)"},
			&cli.StringFlag{Name: "no-revert", Value: "0%", Usage: "share of the range's commits whose revert does not apply on the bad endpoint (kbisect's engine only)"},
			&cli.StringFlag{Name: "first-step", Usage: "two steps: the first bad commit takes a kernel from --good to this level, a later commit on to --bad (beyond --bad: a later commit partly fixes it); right is naming the first"},
			&cli.IntFlag{Name: "machines", Value: 1, Usage: "machines that boot at once into kbisect's one posterior (the wall time is mean_hours)"},
			&cli.Float64Flag{Name: "machine-spread", Usage: "with --machines: log-normal spread of the machines' levels (each machine's factor on every kernel's level)"},
			&cli.BoolFlag{Name: "exec", Usage: "simulate run --exec --confidence on a pass/fail test (--fail-good, --fail-bad) instead of boots"},
			&cli.StringFlag{Name: "fail-good", Usage: "with --exec: the share of a good commit's runs that fail (default 0%)"},
			&cli.StringFlag{Name: "fail-bad", Usage: "with --exec: the share of a bad commit's runs that fail"},
			&cli.IntFlag{Name: "max-runs", Usage: "with --exec: kbisect's budget of runs (default: 20 a step, plus 20)"},
			&cli.IntFlag{Name: "samples-min", Usage: "least samples a boot gives (default 3, or the job's; not given, kbisect's search boots from 1 where calibration finds one sample decisive)"},
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
			if c.NArg() > 0 {
				return usagef("simulate: unexpected argument %q", c.Args().First())
			}
			cfg, err := run.SimulateConfig(c.Context, simulateOptions(c))
			if err != nil {
				return err
			}
			return runSimulate(c.Context, cfg, c.Bool("json"), c.App.Writer, c.App.ErrWriter)
		},
	}
}

// simulateOptions are the flags as given.
func simulateOptions(c *cli.Context) run.SimulateOptions {
	o := run.SimulateOptions{Commits: c.Int("commits"), Runs: c.Int("runs"), Seed: c.Uint64("seed"), MaxBoots: c.Int("max-boots"),
		Machines: c.Int("machines"), MachineSpread: c.Float64("machine-spread"),
		Costs: simulate.Costs{Build: c.Duration("build-cost").Seconds(), Boot: c.Duration("boot-cost").Seconds(), Sample: c.Duration("sample-cost").Seconds()},
		Good:  c.String("good"), Bad: c.String("bad"), Threshold: c.String("threshold"),
		BadBoots: c.String("bad-boots"), StrayBoots: c.String("stray-boots"), Spikes: c.String("spikes"), Flips: c.String("flips"),
		Drift: c.String("drift"), BootAR: c.Float64("boot-ar"), Intermittent: c.String("intermittent"), SpikesBad: c.String("spikes-bad"),
		SampleT: c.Float64("sample-t"), BootT: c.Float64("boot-t"), SpikeTail: c.Float64("spike-tail"), GoodMode: c.String("good-mode"),
		Merges: c.String("merges"), Broken: c.String("broken"), NoRevert: c.String("no-revert"), FirstStep: c.String("first-step"),
		Exec: c.Bool("exec"), FailGood: c.String("fail-good"), FailBad: c.String("fail-bad"), MaxRuns: c.Int("max-runs"),
		MinSamples: c.Int("samples-min"), MaxSamples: c.Int("samples-max"), Confidence: c.Float64("confidence"),
		Job: c.String("job"), State: c.String("from-state"), GoodMeasures: c.StringSlice("good-measure"), BadMeasures: c.StringSlice("bad-measure"),
		History: c.String("from-history"), GoodKernels: c.StringSlice("good-kernel"), BadKernels: c.StringSlice("bad-kernel"),
		Messages: c.App.ErrWriter}
	for name, to := range map[string]**float64{"spread": &o.Spread, "boot-spread": &o.BootSpread} {
		if c.IsSet(name) {
			v := c.Float64(name)
			*to = &v
		}
	}
	if s := c.String("strategies"); s != "" {
		o.Strategies = strings.Split(s, ",")
	}
	return o
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
