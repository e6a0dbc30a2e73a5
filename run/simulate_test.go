package run

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"kbisect/internal/simnoise"
	"kbisect/internal/usage"
	"kbisect/lab"
	"kbisect/noise"
	"kbisect/report"
)

// commandJob writes a job whose workload is a command that prints, one
// sample at a time, the numbers of dir/values (in µs): kbisect measure
// runs it as it runs any command.
func commandJob(t *testing.T, dir, verdict string) string {
	t.Helper()
	script := filepath.Join(dir, "next.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nhead -n1 \""+dir+"/values\"\nsed -i 1d \""+dir+"/values\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return writeJob(t, dir, "{tool: command, cpus: 1, command: "+script+", pattern: '([0-9.]+)', unit: us}", verdict)
}

// writeJob writes dir/job.yaml for machine system-0 with the workload and
// more of the verdict section.
func writeJob(t *testing.T, dir, workload, verdict string) string {
	t.Helper()
	job := filepath.Join(dir, "job.yaml")
	text := `apiVersion: kbisect/v1
kind: Job
machine: {name: system-0, cpus: 2}
host: {address: h, known_hosts: /dev/null}
boot: {method: kexec, params: nohz_full=1 isolcpus=1, power_cycle: pdu 1}
build: {tree: /}
workload: ` + workload + `
verdict: {threshold: auto` + verdict + `}
`
	if err := os.WriteFile(job, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return job
}

// measureFile measures one boot of values (in µs) as kbisect measure
// --local --json does, and writes its JSON to dir/name.
func measureFile(t *testing.T, job, name string, values []float64) string {
	t.Helper()
	dir := filepath.Dir(job)
	var lines strings.Builder
	for _, v := range values {
		fmt.Fprintf(&lines, "%.4f\n", v)
	}
	if err := os.WriteFile(filepath.Join(dir, "values"), []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, res, err := Measure(context.Background(), MeasureOptions{Job: job, Local: true, Samples: len(values)})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	report.WriteJSON(&out, res)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// drawBoots draws n boots of k samples around level (µs) with the model.
func drawBoots(rng *rand.Rand, m simnoise.Model, level, other float64, n, k int) [][]float64 {
	var out [][]float64
	for range n {
		b := m.NewBoot(rng, level, other)
		boot := make([]float64, k)
		for i := range boot {
			boot[i] = b.Sample()
		}
		out = append(out, boot)
	}
	return out
}

// The good and bad kernels' boots (5 each, 6 samples, drawn at 10 and 20
// µs), measured by kbisect measure into a file each, give the model a
// state directory's calibration of the same boots gives: the levels are
// the middle boot's median, the spreads near those drawn. The flags given
// win over it.
func TestSimulateConfigLearnsFromMeasureFilesAsFromAStateDirectory(t *testing.T) {
	dir := t.TempDir()
	job := commandJob(t, dir, "")
	rng := rand.New(rand.NewPCG(3, 3))
	m := simnoise.Model{Spread: 0.2, BootSpread: 0.15}
	good, bad := drawBoots(rng, m, 10, 20, 5, 6), drawBoots(rng, m, 20, 10, 5, 6)
	o := SimulateOptions{Runs: 10}
	cal := &lab.Calibration{Good: &lab.Evidence{Kind: noise.KindTime}, Bad: &lab.Evidence{Kind: noise.KindTime},
		Rule: noise.Rule{Kind: noise.Auto, MetricKind: noise.KindTime, HigherIsBad: true}}
	for i := range good {
		o.GoodMeasures = append(o.GoodMeasures, measureFile(t, job, fmt.Sprintf("good-%d.json", i), good[i]))
		o.BadMeasures = append(o.BadMeasures, measureFile(t, job, fmt.Sprintf("bad-%d.json", i), bad[i]))
		for _, side := range []struct {
			ev   *lab.Evidence
			boot []float64
		}{{cal.Good, good[i]}, {cal.Bad, bad[i]}} {
			for _, v := range side.boot {
				side.ev.Values = append(side.ev.Values, math.Round(v*1e4)/1e4*1000) // as the file has it, in ns
			}
			side.ev.Boots = append(side.ev.Boots, lab.BootInfo{Samples: len(side.boot)})
		}
	}
	var said bytes.Buffer
	o.Messages = &said
	fromFiles, err := SimulateConfig(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	if err := lab.WriteCalibration(state, cal); err != nil {
		t.Fatal(err)
	}
	var saidState bytes.Buffer
	fromState, err := SimulateConfig(context.Background(), SimulateOptions{Runs: 10, State: state, Messages: &saidState})
	if err != nil {
		t.Fatal(err)
	}
	if want := "kbisect: the noise model from " + state + ": 5 and 5 boots of the endpoints; good "; !strings.HasPrefix(saidState.String(), want) {
		t.Errorf("said %q, want %q…", saidState.String(), want)
	}
	c := fromFiles
	if c.Good != fromState.Good || c.Bad != fromState.Bad || c.Noise != fromState.Noise || c.Kind != noise.KindTime {
		t.Errorf("from the files: %g, %g, %+v (%s)\nfrom the state: %g, %g, %+v", c.Good, c.Bad, c.Noise, c.Kind, fromState.Good, fromState.Bad, fromState.Noise)
	}
	middle := func(ev *lab.Evidence) float64 { // on a log scale, as the model sees them
		var medians []float64
		for i := range ev.Boots {
			logs := make([]float64, 6)
			for k, v := range ev.Values[6*i : 6*i+6] {
				logs[k] = math.Log(v)
			}
			medians = append(medians, math.Exp(noise.Median(logs)))
		}
		slices.Sort(medians)
		return medians[2]
	}
	if g, b := middle(cal.Good), middle(cal.Bad); math.Abs(c.Good/g-1) > 1e-9 || math.Abs(c.Bad/b-1) > 1e-9 || c.Threshold != math.Sqrt(c.Good*c.Bad) {
		t.Errorf("good %g ns, bad %g ns, threshold %g; the middle boots measure %g and %g", c.Good, c.Bad, c.Threshold, g, b)
	}
	if c.Noise.Spread < 0.12 || c.Noise.Spread > 0.4 || c.Noise.BootSpread < 0.05 || c.Noise.BootSpread > 0.45 {
		t.Errorf("spread %.3f (drawn 0.2), boot spread %.3f (drawn 0.15)", c.Noise.Spread, c.Noise.BootSpread)
	}
	if want := "kbisect: the noise model from 5 good and 5 bad measure files: value in 5 boots of the good kernel and 5 of the bad, a file each; good "; !strings.HasPrefix(said.String(), want) {
		t.Errorf("said %q, want %q…", said.String(), want)
	}

	spread := 0.3
	o.Good, o.Spread, o.Messages = "8us", &spread, nil
	given, err := SimulateConfig(context.Background(), o)
	if err != nil || given.Good != 8000 || given.Bad != c.Bad || given.Noise.Spread != 0.3 || given.Noise.BootSpread != c.Noise.BootSpread {
		t.Errorf("--good 8us --spread 0.3: %g, %g, %+v, %v", given.Good, given.Bad, given.Noise, err)
	}
	o.Good = "8000"
	if _, err := SimulateConfig(context.Background(), o); err == nil || !strings.Contains(err.Error(), "--good 8000: the learned levels are times: give a time (7us)") {
		t.Errorf("a number for learned times: %v", err)
	}
}

// A job that says lower is worse (a throughput) turns the files' values
// into badness, their inverse.
func TestSimulateConfigTakesTheDirectionFromTheJob(t *testing.T) {
	dir := t.TempDir()
	job := commandJob(t, dir, ", direction: lower-is-bad")
	o := SimulateOptions{Runs: 10, Job: job}
	for i, level := range []float64{20, 21, 19} {
		o.GoodMeasures = append(o.GoodMeasures, measureFile(t, job, fmt.Sprintf("good-%d.json", i), []float64{level, level * 1.02, level * 0.98}))
		o.BadMeasures = append(o.BadMeasures, measureFile(t, job, fmt.Sprintf("bad-%d.json", i), []float64{level / 2, level / 2 * 1.02, level / 2 * 0.98}))
	}
	cfg, err := SimulateConfig(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Kind != noise.KindNumber || math.Abs(cfg.Good/(1/20000.0)-1) > 0.01 || math.Abs(cfg.Bad/(1/10000.0)-1) > 0.01 {
		t.Errorf("good %g, bad %g (%s); want badness 1/20,000 and 1/10,000 ns", cfg.Good, cfg.Bad, cfg.Kind)
	}
}

func TestSimulateConfigSaysWhichMeasureFileIsWrongAndWhatToDo(t *testing.T) {
	dir := t.TempDir()
	job := commandJob(t, dir, "")
	good := measureFile(t, job, "good.json", []float64{10, 10.5, 9.5})
	bad := measureFile(t, job, "bad.json", []float64{20, 21, 19})
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var other lab.MeasureResult
	b, _ := os.ReadFile(bad)
	if err := json.Unmarshal(b, &other); err != nil {
		t.Fatal(err)
	}
	other.Metric = "max_latency"
	b, _ = json.Marshal(other)
	latency := write("latency.json", string(b))
	empty := write("empty.json", `{"samples": [], "values": [], "metric": "value", "kind": "time"}`)
	runJSON := write("run.json", `{"result": "found", "first_bad": "1a2b3c4d5e6f"}`)
	none := filepath.Join(dir, "none.json")
	for _, c := range []struct {
		good, bad []string
		want      string
	}{
		{[]string{job}, []string{bad}, "--good-measure " + job + " is not what kbisect measure --json writes (invalid character 'a' looking for beginning of value): give the file of one boot, kbisect measure --json > FILE"},
		{[]string{good}, []string{runJSON}, "--bad-measure " + runJSON + " is not what kbisect measure --json writes (no metric in it)"},
		{[]string{good, empty}, []string{bad}, "--good-measure " + empty + " has no samples: measure that kernel again (kbisect measure --json --samples 5 > FILE)"},
		{[]string{good}, []string{none}, "--bad-measure " + none + ": no such file or directory"},
		{[]string{good}, nil, "--good-measure and --bad-measure go together: give one file or more of each"},
		{[]string{good}, []string{latency}, "--bad-measure " + latency + " measures max_latency, --good-measure " + good + " value: give boots of one metric"},
		{[]string{bad}, []string{good}, "--good-measure " + bad + " and --bad-measure " + good + ": the two kernels do not differ: the bad one measures 10 µs, the good one 20 µs " +
			"(the medians of their boots' medians), and higher is worse; give files of a kernel that measures good (--good-measure) and of one that measures bad (--bad-measure), of one metric"},
	} {
		_, err := SimulateConfig(context.Background(), SimulateOptions{GoodMeasures: c.good, BadMeasures: c.bad})
		if err == nil || !usage.Is(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--good-measure %v --bad-measure %v: %v\nwant the usage error %q", c.good, c.bad, err, c.want)
		}
	}
	for want, o := range map[string]SimulateOptions{
		"simulate: learn the noise from one source":                                                 {GoodMeasures: []string{good}, BadMeasures: []string{bad}, State: dir},
		"--from-state " + dir + ": no calibration there yet (the run measures its endpoints first)": {State: dir},
	} {
		if _, err := SimulateConfig(context.Background(), o); err == nil || !usage.Is(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nwant the usage error %q", err, want)
		}
	}
}
