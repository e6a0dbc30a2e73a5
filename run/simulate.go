package run

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"kbisect/configs"
	"kbisect/internal/simnoise"
	"kbisect/internal/usage"
	"kbisect/noise"
	"kbisect/simulate"
)

// SimulateOptions are a simulation as kbisect simulate is given it:
// typical samples and shares as a user writes them, a job file, and real
// boots of a good and a bad kernel to learn the noise from — a run's
// calibration, kbisect measure --json files, or the nightly history. What
// is given wins over the job and over what is learned.
type SimulateOptions struct {
	Commits, Runs int
	Seed          uint64
	MaxBoots      int
	Costs         simulate.Costs
	// Machines boot at once into one posterior (simulate.Config), their
	// levels spread log-normal by MachineSpread.
	Machines      int
	MachineSpread float64
	// Good, Bad and Threshold are typical samples as written: a time
	// with its unit (7us) or a plain number; "" when not given.
	Good, Bad, Threshold string
	// Spread and BootSpread win over the learned ones when not nil;
	// without either, the spread is 0.2 and the boot spread 0.
	Spread, BootSpread *float64
	// BadBoots, StrayBoots, Spikes and Flips are shares as written: 5%,
	// 25%:20-60%, 5%:2-20x, 5% ("": none).
	BadBoots, StrayBoots, Spikes, Flips string
	// Drift ("60%:40", "60%:40:flat"), BootAR (the AR(1) coefficient of
	// boot levels), Intermittent (a bad kernel's share of boots that show
	// the regression) and SpikesBad (a bad kernel's share of spikes) are
	// the shapes of a night a run must survive ("": none).
	Drift, Intermittent, SpikesBad string
	BootAR                         float64
	// SampleT and BootT are the degrees of freedom of a Student-t the
	// samples' deviations and the boots' levels are drawn from (0: a
	// normal), SpikeTail the index of a Pareto the spikes' factors are
	// drawn from (0: log-uniform), GoodMode a second mode of a good
	// kernel's boots ("30%:1.6x"; "": none): shapes the model does not
	// assume, to measure it against.
	SampleT, BootT, SpikeTail float64
	GoodMode                  string
	// Merges, Broken and NoRevert are the range's shape beyond a line of
	// commits that all build: the shares of merges, of commits that do
	// not build and of those whose revert does not apply ("": none);
	// Merges is a share of the mainline's commits.
	Merges, Broken, NoRevert string
	// FirstStep is the level of a regression's first step, written as
	// --good is ("": one step).
	FirstStep string
	// Exec simulates run --exec --confidence on a pass/fail test: good
	// commits fail FailGood of their runs, bad ones FailBad (shares as
	// written); MaxRuns is its budget.
	Exec              bool
	FailGood, FailBad string
	MaxRuns           int
	// MinSamples, MaxSamples and Confidence are 0 when not given: the
	// job's, or simulate's defaults.
	MinSamples, MaxSamples int
	Confidence             float64
	Strategies             []string
	// Job is a job file: its samples, confidence and absolute threshold,
	// and its metric's direction.
	Job string
	// State is a run's state directory: its calibration's boots of the
	// endpoints.
	State string
	// GoodMeasures and BadMeasures are kbisect measure --json files of a
	// good and a bad kernel, one boot each.
	GoodMeasures, BadMeasures []string
	// History is a nightly database; its measurements of GoodKernels and
	// BadKernels (release tags, or commits) are the boots, one each.
	History                 string
	GoodKernels, BadKernels []string
	// Messages gets kbisect's own lines: the job's warnings, what was
	// learned.
	Messages io.Writer
}

// SimulateConfig turns the options into a simulation: the job's rule, the
// noise learned from the real boots given, the flags over both. Every
// mistake is a usage error that names its flag, or its file.
func SimulateConfig(ctx context.Context, o SimulateOptions) (simulate.Config, error) {
	if o.Messages == nil {
		o.Messages = io.Discard
	}
	cfg := simulate.Config{Commits: o.Commits, Runs: o.Runs, Seed: o.Seed, MaxBoots: o.MaxBoots, Costs: o.Costs, Strategies: o.Strategies,
		Machines: o.Machines, MachineSpread: o.MachineSpread,
		MinSamples: o.MinSamples, MaxSamples: o.MaxSamples, Confidence: o.Confidence}
	if o.Exec {
		return simulateExec(o, cfg)
	}
	if o.FailGood != "" || o.FailBad != "" || o.MaxRuns != 0 {
		return cfg, usage.Errorf("simulate: --fail-good, --fail-bad and --max-runs are for --exec (a pass/fail test)")
	}
	var job *configs.Job
	if o.Job != "" {
		var err error
		if job, err = configs.Open(o.Job, o.Messages); err != nil {
			return cfg, err
		}
	}
	boots, err := realBoots(ctx, o, job)
	if err != nil {
		return cfg, err
	}
	var learned *simulate.Learned
	if boots != nil {
		if learned, err = simulate.Learn(boots.good, boots.bad, boots.kind, boots.higherIsBad); err != nil {
			return cfg, usage.Errorf("%s: %v%s", boots.flags, err, boots.advice)
		}
	} else if o.Good == "" || o.Bad == "" {
		return cfg, usage.Errorf("simulate: give --good and --bad (a good and a bad kernel's typical sample, as 7us and 15us), " +
			"or learn them from real boots: --from-state DIR, --good-measure FILE and --bad-measure FILE, or --from-history DB")
	}
	if cfg.Kind, err = levels(o, learned, &cfg); err != nil {
		return cfg, err
	}
	if o.Threshold != "" {
		v, k, err := typicalSample(o.Threshold)
		if err != nil || k != cfg.Kind {
			return cfg, usage.Errorf("--threshold %s: give it as --good and --bad are given", o.Threshold)
		}
		cfg.Threshold = v
	}
	if o.FirstStep != "" {
		v, k, err := typicalSample(o.FirstStep)
		if err != nil || k != cfg.Kind {
			return cfg, usage.Errorf("--first-step %s: give it as --good and --bad are given", o.FirstStep)
		}
		cfg.FirstStep = v
	}
	if job != nil {
		v := job.Verdict
		least := v.Samples.Min
		if job.Defaulted("verdict.samples.min") {
			least = 0 // the engine's search picks it, as a run does
		}
		cfg.MinSamples, cfg.MaxSamples, cfg.Confidence = orJob(cfg.MinSamples, least), orJob(cfg.MaxSamples, v.Samples.Max), orJob(cfg.Confidence, v.Confidence)
		if v.Threshold.Kind == configs.ThresholdTime && cfg.Threshold == 0 && cfg.Kind == noise.KindTime {
			cfg.Threshold = float64(v.Threshold.Time.Nanoseconds())
		}
	}
	if cfg.Noise, err = noiseModel(o, learned); err != nil {
		return cfg, err
	}
	for _, f := range []struct {
		flag, v string
		to      *float64
	}{{"--merges", o.Merges, &cfg.Shape.Merges}, {"--broken", o.Broken, &cfg.Shape.Broken}, {"--no-revert", o.NoRevert, &cfg.Shape.NoRevert}} {
		if *f.to, err = simnoise.ParsePercent(none(f.v)); err != nil {
			return cfg, usage.Errorf("%s: %v", f.flag, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usage.Errorf("simulate: %v", err)
	}
	if learned != nil {
		bs := fmt.Sprintf("%.2f", cfg.Noise.BootSpread)
		if !learned.BootSpreadLearned && o.BootSpread == nil {
			bs += " (not learned: one boot of a kernel; --boot-spread says it)"
		}
		fmt.Fprintf(o.Messages, "kbisect: the noise model from %s: %s; good %s, bad %s, spread %.2f, boot spread %s\n", boots.from, boots.about,
			noise.FormatValue(cfg.Kind, cfg.Good), noise.FormatValue(cfg.Kind, cfg.Bad), cfg.Noise.Spread, bs)
	}
	return cfg, nil
}

// simulateExec is a simulation of run --exec --confidence: the test's
// failure rates on good and bad commits, nothing of boots.
func simulateExec(o SimulateOptions, cfg simulate.Config) (simulate.Config, error) {
	for _, f := range []struct{ flag, v string }{{"--good", o.Good}, {"--bad", o.Bad}, {"--job", o.Job}, {"--from-state", o.State},
		{"--from-history", o.History}, {"--spikes", o.Spikes}, {"--drift", o.Drift}, {"--intermittent", o.Intermittent},
		{"--merges", o.Merges}, {"--broken", o.Broken}, {"--no-revert", o.NoRevert}, {"--first-step", o.FirstStep}} {
		if f.v != "" && f.v != "0%" {
			return cfg, usage.Errorf("simulate --exec: %s is for boots of a noisy metric; a pass/fail test has --fail-good and --fail-bad", f.flag)
		}
	}
	if o.FailBad == "" {
		return cfg, usage.Errorf("simulate --exec: give --fail-bad, the share of a bad commit's runs that fail (and --fail-good, a good one's: 0 by default)")
	}
	var err error
	if cfg.FailBad, err = simnoise.ParsePercent(o.FailBad); err != nil {
		return cfg, usage.Errorf("--fail-bad: %v", err)
	}
	if o.FailGood != "" {
		if cfg.FailGood, err = simnoise.ParsePercent(o.FailGood); err != nil {
			return cfg, usage.Errorf("--fail-good: %v", err)
		}
	}
	cfg.Exec, cfg.MaxRuns = true, o.MaxRuns
	if err := cfg.Validate(); err != nil {
		return cfg, usage.Errorf("simulate: %v", err)
	}
	return cfg, nil
}

// orJob is v, or else (when v is 0) the job's.
func orJob[T int | float64](v, job T) T {
	if v == 0 {
		return job
	}
	return v
}

// levels sets the good and the bad level, the flags' over the learned
// ones, and returns their kind.
func levels(o SimulateOptions, learned *simulate.Learned, cfg *simulate.Config) (string, error) {
	kind, given := "", false
	if learned != nil {
		cfg.Good, cfg.Bad, kind = learned.Good, learned.Bad, learned.Kind
	}
	for _, f := range []struct {
		flag, value string
		level       *float64
	}{{"--good", o.Good, &cfg.Good}, {"--bad", o.Bad, &cfg.Bad}} {
		if f.value == "" {
			continue
		}
		v, k, err := typicalSample(f.value)
		switch {
		case err != nil:
			return "", usage.Errorf("%s: %v", f.flag, err)
		case given && k != kind:
			return "", usage.Errorf("--good %s and --bad %s: give both as times (7us) or both as numbers", o.Good, o.Bad)
		case learned != nil && k != kind && kind == noise.KindTime:
			return "", usage.Errorf("%s %s: the learned levels are times: give a time (7us)", f.flag, f.value)
		case learned != nil && k != kind:
			return "", usage.Errorf("%s %s: the learned levels are numbers (a badness, when lower is worse): give a number", f.flag, f.value)
		}
		*f.level, kind, given = v, k, true
	}
	return kind, nil
}

// noiseModel is the noise: the spreads given or learned, and the shares
// given.
func noiseModel(o SimulateOptions, learned *simulate.Learned) (simnoise.Model, error) {
	m := simnoise.Model{Spread: 0.2}
	if learned != nil {
		m.Spread, m.BootSpread = learned.Spread, learned.BootSpread
	}
	if o.Spread != nil {
		m.Spread = *o.Spread
	}
	if o.BootSpread != nil {
		m.BootSpread = *o.BootSpread
	}
	var err error
	if m.BadBoots, err = simnoise.ParsePercent(none(o.BadBoots)); err != nil {
		return m, usage.Errorf("--bad-boots: %v", err)
	}
	if m.Strays, m.StrayMin, m.StrayMax, err = simnoise.ParseStrays(none(o.StrayBoots)); err != nil {
		return m, usage.Errorf("--stray-boots: %v", err)
	}
	if m.Flips, err = simnoise.ParsePercent(none(o.Flips)); err != nil {
		return m, usage.Errorf("--flips: %v", err)
	}
	if m.Spikes, m.SpikeMin, m.SpikeMax, err = simnoise.ParseSpikes(none(o.Spikes)); err != nil {
		return m, usage.Errorf("--spikes: %v", err)
	}
	if m.Drift, m.DriftBoots, m.DriftFlat, err = simnoise.ParseDrift(none(o.Drift)); err != nil {
		return m, usage.Errorf("--drift: %v", err)
	}
	if m.Intermittent, err = simnoise.ParsePercent(none(o.Intermittent)); err != nil {
		return m, usage.Errorf("--intermittent: %v", err)
	}
	m.AR = o.BootAR
	m.SampleNu, m.BootNu, m.SpikeTail = o.SampleT, o.BootT, o.SpikeTail
	if m.GoodMode, m.GoodModeAt, err = simnoise.ParseMode(none(o.GoodMode)); err != nil {
		return m, usage.Errorf("--good-mode: %v", err)
	}
	if o.SpikeTail != 0 && m.SpikeMin == 0 {
		return m, usage.Errorf("--spike-tail %g: give the spikes with --spikes (their share and size range, as in 5%%:2-200x)", o.SpikeTail)
	}
	if o.SpikesBad != "" {
		if m.SpikesBad, err = simnoise.ParsePercent(o.SpikesBad); err != nil {
			return m, usage.Errorf("--spikes-bad: %v", err)
		}
		m.HasSpikesBad = true
		if m.SpikeMin == 0 {
			return m, usage.Errorf("--spikes-bad %s: say how large the spikes are with --spikes (the good kernel's share and their size, as in 2%%:3-10x, or 0%%:3-10x for none)", o.SpikesBad)
		}
	}
	return m, nil
}

// typicalSample reads a typical sample: a time with its unit (in ns, kind
// noise.KindTime), or a plain number (noise.KindNumber).
func typicalSample(s string) (float64, string, error) {
	if v, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
		return v, noise.KindNumber, nil
	}
	d, err := configs.ParseDuration(s)
	if err != nil {
		return 0, "", err
	}
	return float64(d.D().Nanoseconds()), noise.KindTime, nil
}

// none is a share as written, "" read as none.
func none(share string) string {
	if share == "" {
		return "0%"
	}
	return share
}
