package run

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kbisect/history"
	"kbisect/internal/simnoise"
	"kbisect/internal/usage"
	"kbisect/noise"
	"kbisect/verdict"
)

// nightlyHistory writes a nightly database as nightly does: system-0
// measured v6.12.57 on five nights (max_single_noise around 10 µs, each
// night one boot of 5 samples), v6.12.58 on three around 20 µs and once
// when it did not boot; system-1 measured v6.12.57 once. It returns the
// path and the boots of each system-0 kernel.
func nightlyHistory(t *testing.T) (string, map[string][][]float64) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	d, err := history.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rng := rand.New(rand.NewPCG(11, 11))
	model := simnoise.Model{Spread: 0.15, BootSpread: 0.2}
	boots := map[string][][]float64{}
	night := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	add := func(machine, tag, commit string, level float64, ok bool) {
		m := history.Measurement{Tag: tag, Commit: commit, Release: strings.TrimPrefix(tag, "v") + "-rt", Metric: "max_single_noise", Kind: noise.KindTime,
			Values: []float64{}, Verdict: verdict.Skip, Reason: "did not boot", Night: night.Format(time.RFC3339), MeasuredAt: night.Add(time.Hour)}
		if ok {
			b := model.NewBoot(rng, level, 30000-level)
			for range 5 {
				m.Values = append(m.Values, b.Sample())
			}
			m.Median, m.Verdict, m.Reason = noise.Median(m.Values), verdict.Good, "measured"
			if machine == "system-0" {
				boots[tag] = append(boots[tag], m.Values)
			}
		}
		w := history.Where{Machine: machine, Remote: "https://git.kernel.org/pub/scm/linux/kernel/git/rt/linux-stable-rt.git", Branch: "v6.12-rt"}
		if _, err := d.AddMeasurement(ctx, w, m); err != nil {
			t.Fatal(err)
		}
		night = night.Add(24 * time.Hour)
	}
	for i := range 5 {
		add("system-0", "v6.12.57", strings.Repeat("57", 20), 10000, true)
		if i < 3 {
			add("system-0", "v6.12.58", strings.Repeat("58", 20), 20000, true)
		}
	}
	add("system-0", "v6.12.58", strings.Repeat("58", 20), 20000, false)
	add("system-1", "v6.12.57", strings.Repeat("57", 20), 12000, true)
	return path, boots
}

// Each night's measurement is one boot: five of v6.12.57 and three of
// v6.12.58 (its night that did not boot left out) give the levels, the
// middle boots' medians, and the boot spread that a run's calibration
// can hardly learn.
func TestSimulateConfigLearnsFromTheNightlyHistory(t *testing.T) {
	db, boots := nightlyHistory(t)
	job := writeJob(t, t.TempDir(), "{tool: osnoise, cpus: 1, duration: 10s}", "")
	var said bytes.Buffer
	o := SimulateOptions{Runs: 10, Job: job, History: db, GoodKernels: []string{"v6.12.57"}, BadKernels: []string{"585858585858"}, Messages: &said}
	cfg, err := SimulateConfig(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	middle := func(bs [][]float64) float64 { // on a log scale, as the model sees them
		var medians []float64
		for _, b := range bs {
			logs := make([]float64, len(b))
			for k, v := range b {
				logs[k] = math.Log(v)
			}
			medians = append(medians, noise.Median(logs))
		}
		return math.Exp(noise.Median(medians))
	}
	if g, b := middle(boots["v6.12.57"]), middle(boots["v6.12.58"]); math.Abs(cfg.Good/g-1) > 1e-9 || math.Abs(cfg.Bad/b-1) > 1e-9 || cfg.Kind != noise.KindTime {
		t.Errorf("good %g, bad %g (%s); the middle boots measure %g and %g", cfg.Good, cfg.Bad, cfg.Kind, g, b)
	}
	if cfg.Noise.Spread < 0.08 || cfg.Noise.Spread > 0.3 || cfg.Noise.BootSpread < 0.08 || cfg.Noise.BootSpread > 0.5 {
		t.Errorf("spread %.3f (drawn 0.15), boot spread %.3f (drawn 0.2)", cfg.Noise.Spread, cfg.Noise.BootSpread)
	}
	want := fmt.Sprintf("kbisect: the noise model from %s: max_single_noise in 5 nightly measurements of v6.12.57 and 3 of 585858585858 on system-0, one boot each; good ", db)
	if !strings.HasPrefix(said.String(), want) {
		t.Errorf("said %q, want %q…", said.String(), want)
	}
}

func TestSimulateConfigSaysWhatTheHistoryLacks(t *testing.T) {
	db, _ := nightlyHistory(t)
	none := filepath.Join(t.TempDir(), "history.db")
	for _, c := range []struct {
		o    SimulateOptions
		want string
	}{
		{SimulateOptions{History: db, GoodKernels: []string{"v6.12.57"}, BadKernels: []string{"v6.12.58"}},
			"--from-history " + db + " holds the machines system-0, system-1: give --job FILE of the one to learn about"},
		{SimulateOptions{History: none, GoodKernels: []string{"v6.12.57"}, BadKernels: []string{"v6.12.58"}},
			"--from-history " + none + ": no such file or directory: give the nightly's database (<git dir of build.tree>/kbisect/history.db, or nightly's --db)"},
		{SimulateOptions{History: db, GoodKernels: []string{"v6.12.57"}},
			"--from-history " + db + ": name the kernels to learn from, --good-kernel TAG and --bad-kernel TAG"},
		{SimulateOptions{GoodKernels: []string{"v6.12.57"}, BadKernels: []string{"v6.12.58"}},
			"--good-kernel and --bad-kernel name kernels of the nightly history: give --from-history DB too"},
		{SimulateOptions{History: db, GoodKernels: []string{"v6.12.57"}, BadKernels: []string{"v6.12.57"}},
			"--good-kernel and --bad-kernel both name v6.12.57"},
	} {
		_, err := SimulateConfig(context.Background(), c.o)
		if err == nil || !usage.Is(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v\nwant the usage error %q", err, c.want)
		}
	}
	if _, err := os.Stat(none); err == nil {
		t.Errorf("a database was made at %s", none)
	}

	// One machine alone needs no job.
	ctx := context.Background()
	one := filepath.Join(t.TempDir(), "history.db")
	d, err := history.Open(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	w := history.Where{Machine: "system-0", Remote: "r", Branch: "b"}
	for _, m := range []history.Measurement{
		{Tag: "v6.12.57", Metric: "max_single_noise", Kind: noise.KindTime, Values: []float64{10000, 11000, 9000}},
		{Tag: "v6.12.58", Metric: "max_single_noise", Kind: noise.KindTime, Values: []float64{10000, 9500, 10500}},
		{Tag: "v6.12.59", Metric: "noise", Kind: noise.KindTime, Values: []float64{30000, 31000, 29000}},
	} {
		if _, err := d.AddMeasurement(ctx, w, m); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
	for bad, want := range map[string]string{
		"v6.13":    "--from-history " + one + ": --bad-kernel v6.13: no measurement of it on system-0 (it measured v6.12.57, v6.12.58, v6.12.59)",
		"v6.12.59": "--from-history " + one + ": v6.12.59 was measured as noise, v6.12.57 as max_single_noise: give kernels measured on one metric",
		"v6.12.58": "--from-history " + one + ": the two kernels do not differ: the bad one measures 10 µs, the good one 10 µs (the medians of their boots' medians), " +
			"and higher is worse; give --good-kernel a kernel the history measured good and --bad-kernel one it measured bad",
	} {
		_, err := SimulateConfig(ctx, SimulateOptions{History: one, GoodKernels: []string{"v6.12.57"}, BadKernels: []string{bad}})
		if err == nil || !usage.Is(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("--bad-kernel %s: %v\nwant the usage error %q", bad, err, want)
		}
	}
}
