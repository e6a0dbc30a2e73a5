package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/history"
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

// A range with merges, broken builds and reverts that do not apply is
// bisected by kbisect's engine alone, and the JSON says its shape.
func TestSimulateBisectsAShapedRange(t *testing.T) {
	code, stdout, stderr := runCLI(t, context.Background(), "simulate", "--good", "7us", "--bad", "15us", "--commits", "300", "--runs", "10",
		"--merges", "10%", "--broken", "5%", "--no-revert", "20%", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		Strategies []struct {
			Name       string `json:"name"`
			Right      int    `json:"right"`
			WrongFound int    `json:"wrong_found"`
		} `json:"strategies"`
	}
	var shape map[string]any
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	_ = json.Unmarshal([]byte(stdout), &shape)
	if len(out.Strategies) != 1 || out.Strategies[0].Name != "kbisect" || out.Strategies[0].WrongFound != 0 || out.Strategies[0].Right < 8 ||
		shape["merges"] != 0.1 || shape["broken"] != 0.05 || shape["no_revert"] != 0.2 {
		t.Errorf("%s", stdout)
	}
	code, stdout, stderr = runCLI(t, context.Background(), "simulate", "--good", "7us", "--bad", "15us", "--commits", "300", "--runs", "2",
		"--merges", "10%", "--broken", "5%")
	if want := "range: 10 % of the mainline's commits merge a topic branch; 5 % of the commits do not build; 0 % of the reverts do not apply"; code != 0 || !strings.Contains(stdout, want) {
		t.Errorf("exit %d, no %q in:\n%s%s", code, want, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, context.Background(), "simulate", "--good", "7us", "--bad", "15us", "--commits", "64", "--runs", "2",
		"--first-step", "10us", "--strategies", "kbisect")
	if want := "two steps: the first bad commit takes a kernel to 10 µs, a later one on to 15 µs; right is naming the first"; code != 0 || !strings.Contains(stdout, want) {
		t.Errorf("exit %d, no %q in:\n%s%s", code, want, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, context.Background(), "simulate", "--good", "7us", "--bad", "15us", "--commits", "64", "--runs", "2",
		"--machines", "3", "--machine-spread", "0.2")
	if want := "machines: 3 booting at once into one posterior, their levels spread 0.2; hours are the wall time"; code != 0 || !strings.Contains(stdout, want) || strings.Contains(stdout, "git-bisect") {
		t.Errorf("exit %d, no %q (and kbisect alone) in:\n%s%s", code, want, stdout, stderr)
	}
	code, _, stderr = runCLI(t, context.Background(), "simulate", "--good", "7us", "--bad", "15us", "--runs", "2", "--machines", "2", "--strategies", "kbisect,rule")
	if want := "--strategies rule: with --machines 2 only kbisect's engine boots on several machines"; code == 0 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, no %q in:\n%s", code, want, stderr)
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
		"--good 7us --bad x":                                             `--bad: "x" is not a duration`,
		"--good 7us --bad 15":                                            "--good 7us and --bad 15: give both as times (7us) or both as numbers",
		"--good 7us --bad 15us --spikes 5%":                              `--spikes: "5%": say how large the spikes are, as in 5%:2-20x`,
		"--good 7us --bad 15us --bad-boots 60%":                          "simulate: bad-boots 0.6 is not between 0 and 0.5",
		"--good 15us --bad 7us":                                          "the bad kernel's samples must be larger than the good one's",
		"--good 7us --bad 15us --strategies foo":                         `no strategy "foo"`,
		"--from-state /nonexistent/run-1":                                "--from-state /nonexistent/run-1: no such file or directory",
		"--good-measure good.json":                                       "--good-measure and --bad-measure go together",
		"--good-kernel v6.1 --bad-kernel v6.2":                           "--good-kernel and --bad-kernel name kernels of the nightly history: give --from-history DB too",
		"--good 7us --bad 15us --merges 100%":                            "--merges 1: a share of the commits below 100%",
		"--good 7us --bad 15us --broken x":                               `--broken: "x" is not a share`,
		"--good 7us --bad 15us --no-revert 5% --strategies kbisect,rule": "--strategies rule: with --merges, --broken or --no-revert only kbisect's engine bisects the range",
		"--good 7us --bad 15us --first-step 15us":                        "--first-step 15000: a level other than --good's and --bad's",
		"--good 7us --bad 15us --first-step 9":                           "--first-step 9: give it as --good and --bad are given",
		"--exec --fail-bad 30% --merges 5%":                              "simulate --exec: --merges is for boots of a noisy metric",
		"--good 7us --bad 15us --spike-tail 1":                           "--spike-tail 1: give the spikes with --spikes",
		"--good 7us --bad 15us --good-mode 30%":                          `--good-mode: "30%": say the factor on those boots' level, as in 30%:1.6x`,
		"--good 7us --bad 15us --sample-t 0.5":                           "simulate: sample-t 0.5: give the Student-t's degrees of freedom, between 1 and 1000",
	} {
		code, _, stderr := runCLI(t, context.Background(), append([]string{"simulate"}, strings.Fields(args)...)...)
		if code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("simulate %s: exit %d, %q; want 2 and %q", args, code, stderr, want)
		}
	}
}

// The shapes the model does not assume reach the noise a simulation
// draws, and say so in its JSON.
func TestSimulateDrawsHeavyTailsAndABimodalGoodKernel(t *testing.T) {
	code, stdout, stderr := runCLI(t, context.Background(), "simulate", "--json", "--good", "7us", "--bad", "15us", "--commits", "64", "--runs", "4", "--strategies", "kbisect",
		"--sample-t", "2", "--boot-t", "3", "--boot-spread", "0.1", "--spikes", "5%:2-1000x", "--spike-tail", "1", "--good-mode", "30%:1.6x")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out simulateOut
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if want := "spikes=5%:2-1000x,sample-t=2,boot-t=3,spike-tail=1,good-mode=30%:1.6x"; !strings.Contains(out.Noise, want) {
		t.Errorf("noise %q, want %q in it", out.Noise, want)
	}
}

// simulateOut is what kbisect simulate --json says of the model.
type simulateOut struct {
	Good, Bad float64
	Kind      string
	Noise     string
}

// Three boots of each kernel, measured by kbisect measure --json into a
// file each, give the levels (the middle boot's median) and the spreads.
func TestSimulateLearnsTheNoiseFromMeasureFiles(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "next.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nhead -n1 \""+dir+"/values\"\nsed -i 1d \""+dir+"/values\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	job := jobFile(t, `apiVersion: kbisect/v1
kind: Job
machine: {name: vm, cpus: 2}
host: {address: h, known_hosts: /dev/null}
boot: {method: kexec, params: nohz_full=1 isolcpus=1, power_cycle: pdu 1}
build: {tree: /}
workload: {tool: command, cpus: 1, command: `+script+`, pattern: '([0-9.]+)', unit: us}
verdict: {threshold: auto, samples: {min: 5, max: 5}}
`)
	args := []string{"simulate", "--commits", "64", "--runs", "8", "--strategies", "kbisect", "--json"}
	for i, boot := range []string{"10 10.4 9.7 10.2 9.9", "11 11.6 10.6 11.3 10.9", "9.5 9.1 9.8 9.4 9.6", "20 21 19.5 20.4 19.8", "22 23.5 21 22.4 21.6", "19 19.6 18.4 19.3 18.8"} {
		if err := os.WriteFile(filepath.Join(dir, "values"), []byte(strings.ReplaceAll(boot, " ", "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI(t, context.Background(), "measure", "--local", "--job", job, "--json")
		if code != exitOK {
			t.Fatalf("measure: exit %d: %s", code, stderr)
		}
		side := []string{"good", "bad"}[i/3]
		file := filepath.Join(dir, fmt.Sprintf("%s-%d.json", side, i%3))
		if err := os.WriteFile(file, []byte(stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--"+side+"-measure", file)
	}
	code, stdout, stderr := runCLI(t, context.Background(), args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out simulateOut
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if math.Abs(out.Good-10000) > 1e-6 || math.Abs(out.Bad-20000) > 1e-6 || out.Kind != noise.KindTime || !strings.Contains(out.Noise, "boot-spread=0.") ||
		!strings.Contains(stderr, "the noise model from 3 good and 3 bad measure files: value in 3 boots of the good kernel and 3 of the bad, a file each; good 10 µs, bad 20 µs, spread") {
		t.Errorf("good %g, bad %g (%s), noise %s; stderr %s", out.Good, out.Bad, out.Kind, out.Noise, stderr)
	}

	code, _, stderr = runCLI(t, context.Background(), "simulate", "--good-measure", job, "--bad-measure", filepath.Join(dir, "bad-0.json"))
	if code != exitUsage || !strings.Contains(stderr, "--good-measure "+job+" is not what kbisect measure --json writes") {
		t.Errorf("a job file as a measure file: exit %d, %s", code, stderr)
	}
}

// Each nightly measurement of a kernel is one boot of it.
func TestSimulateLearnsTheNoiseFromTheNightlyHistory(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "history.db")
	d, err := history.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	w := history.Where{Machine: "system-0", Remote: "https://git.kernel.org/pub/scm/linux/kernel/git/stable/linux.git", Branch: "linux-6.12.y"}
	for _, m := range []history.Measurement{
		{Tag: "v6.12.57", Values: []float64{10000, 10500, 9600}},
		{Tag: "v6.12.58", Values: []float64{20000, 21000, 19000}},
		{Tag: "v6.12.57", Values: []float64{12000, 12600, 11400}},
		{Tag: "v6.12.58", Values: []float64{24000, 25000, 23000}},
		{Tag: "v6.12.57", Values: []float64{8000, 8500, 7700}},
		{Tag: "v6.12.58", Values: []float64{17000, 18000, 16000}},
	} {
		m.Metric, m.Kind, m.Verdict = "max_single_noise", noise.KindTime, "good"
		if _, err := d.AddMeasurement(ctx, w, m); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
	code, stdout, stderr := runCLI(t, ctx, "simulate", "--from-history", db, "--good-kernel", "v6.12.57", "--bad-kernel", "v6.12.58",
		"--commits", "64", "--runs", "8", "--strategies", "kbisect", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out simulateOut
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if math.Abs(out.Good-10000) > 1e-6 || math.Abs(out.Bad-20000) > 1e-6 || !strings.Contains(out.Noise, "boot-spread=0.") ||
		!strings.Contains(stderr, "max_single_noise in 3 nightly measurements of v6.12.57 and 3 of v6.12.58 on system-0, one boot each; good 10 µs, bad 20 µs") {
		t.Errorf("good %g, bad %g, noise %s; stderr %s", out.Good, out.Bad, out.Noise, stderr)
	}
	code, _, stderr = runCLI(t, ctx, "simulate", "--from-history", db, "--good-kernel", "v6.12.57", "--bad-kernel", "v6.13")
	if code != exitUsage || !strings.Contains(stderr, "--bad-kernel v6.13: no measurement of it on system-0 (it measured v6.12.57, v6.12.58)") {
		t.Errorf("an unknown kernel: exit %d, %s", code, stderr)
	}
}
