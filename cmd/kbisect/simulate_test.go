package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"kbisect/lab"
	"kbisect/noise"
)

// kbisect simulate --json is what scripts read: the runs, and per
// strategy the outcomes as integers that add up to the runs.
func TestSimulateJSONCountsEveryRun(t *testing.T) {
	code, stdout, stderr := runCLI(t, context.Background(), "simulate", "--good", "7us", "--bad", "15us", "--spread", "0.2",
		"--spikes", "5%:2-20x", "--bad-boots", "5%", "--commits", "256", "--runs", "20", "--seed", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		Runs       int `json:"runs"`
		Strategies []struct {
			Name          string  `json:"name"`
			Right         int     `json:"right"`
			WrongFound    int     `json:"wrong_found"`
			Inconclusive  int     `json:"inconclusive"`
			NotReproduced int     `json:"not_reproduced"`
			MeanBoots     float64 `json:"mean_boots"`
			MeanSamples   float64 `json:"mean_samples"`
			MeanHours     float64 `json:"mean_hours"`
		} `json:"strategies"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	var names []string
	for _, s := range out.Strategies {
		names = append(names, s.Name)
		if s.Right+s.WrongFound+s.Inconclusive+s.NotReproduced != out.Runs || s.MeanBoots <= 0 || s.MeanSamples < s.MeanBoots || s.MeanHours <= 0 {
			t.Errorf("%+v", s)
		}
	}
	if out.Runs != 20 || strings.Join(names, ",") != "kbisect,rule,git-bisect,median-10" {
		t.Errorf("runs %d, strategies %v", out.Runs, names)
	}
	if out.Strategies[0].Right < 19 || out.Strategies[0].WrongFound != 0 {
		t.Errorf("kbisect: %+v", out.Strategies[0])
	}
}

func TestSimulateTextNamesTheSetting(t *testing.T) {
	code, stdout, stderr := runCLI(t, context.Background(), "simulate", "--good", "3us", "--bad", "49ms", "--commits", "64", "--runs", "10", "--strategies", "kbisect,git-bisect")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"10 simulated bisections of 64 commits (seed 1): good kernels 3 µs, bad 49,000 µs", "costs: build 10m, boot 2m, sample 1m",
		"kbisect  100.0 %", "git-bisect", "10 runs: a share is known to about ±15.8 points"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no %q in:\n%s", want, stdout)
		}
	}
}

func TestSimulateSaysWhichFlagIsWrong(t *testing.T) {
	for args, want := range map[string]string{
		"--good 7us --bad x":                     `--bad: "x" is not a duration`,
		"--good 7us --bad 15":                    "--good 7us and --bad 15: give both as times (7us) or both as numbers",
		"--good 7us --bad 15us --spikes 5%":      `--spikes: "5%": say how large the spikes are, as in 5%:2-20x`,
		"--good 7us --bad 15us --bad-boots 60%":  "simulate: bad-boots 0.6 is not between 0 and 0.5",
		"--good 15us --bad 7us":                  "the bad kernel's samples must be larger than the good one's",
		"--good 7us --bad 15us --strategies foo": `no strategy "foo"`,
	} {
		code, _, stderr := runCLI(t, context.Background(), append([]string{"simulate"}, strings.Fields(args)...)...)
		if code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("simulate %s: exit %d, %q; want 2 and %q", args, code, stderr, want)
		}
	}
}

// --from-state learns the levels and spreads from a run's calibration:
// three boots of each endpoint here, 10 µs and 20 µs.
func TestSimulateLearnsTheNoiseFromAStateDirectory(t *testing.T) {
	dir := t.TempDir()
	ev := func(level float64) *lab.Evidence {
		e := &lab.Evidence{Kind: noise.KindTime}
		for b := 0; b < 3; b++ {
			for i := 0; i < 5; i++ {
				e.Values = append(e.Values, level*(1+0.02*float64(i-2))*(1+0.01*float64(b)))
			}
			e.Boots = append(e.Boots, lab.BootInfo{Samples: 5})
		}
		return e
	}
	cal := &lab.Calibration{Good: ev(10000), Bad: ev(20000), Reproduced: true,
		Rule: noise.Rule{Kind: noise.Auto, MetricKind: noise.KindTime, HigherIsBad: true, MinSamples: 3, MaxSamples: 10, Confidence: 0.95}}
	if err := lab.WriteCalibration(dir, cal); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, context.Background(), "simulate", "--from-state", dir, "--commits", "64", "--runs", "8", "--strategies", "kbisect", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		Good, Bad float64
		Noise     string
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Good < 9900 || out.Good > 10300 || out.Bad < 19800 || out.Bad > 20600 || !strings.Contains(stderr, "3 and 3 boots of the endpoints") {
		t.Errorf("good %g, bad %g, noise %s; stderr %s", out.Good, out.Bad, out.Noise, stderr)
	}
	if code, _, stderr := runCLI(t, context.Background(), "simulate", "--from-state", t.TempDir()); code != 2 || !strings.Contains(stderr, "no calibration there yet") {
		t.Errorf("an empty state directory: exit %d, %s", code, stderr)
	}
}
