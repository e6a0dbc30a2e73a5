package lab

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kbisect/configs"
	"kbisect/internal/shell"
	"kbisect/noise"
	"kbisect/verdict"
)

func loadJob(t *testing.T, text string) *configs.Job {
	t.Helper()
	p := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	job, err := configs.Load(p, configs.LoadOptions{Home: t.TempDir(), LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

const seedJob = `apiVersion: kbisect/v1
kind: Job
machine: {name: system-0, cpus: 64}
host: {address: h}
boot: {method: kexec, power_cycle: pdu 1, params: "nohz_full=1-16,33-48 isolcpus=nohz,domain,managed_irq,1-16,33-48 rcu_nocbs=1-31,33-63 kthread_cpus=0,32 irqaffinity=17-31,49-63"}
build: {tree: /}
workload: {tool: osnoise, duration: 60s, period: 1s, runtime: 950ms, load: "epoll-storm --threads ${STORM_THREADS}"}
verdict: {threshold: 20us}
`

func TestTheSeedJobBecomesTheSeedWorkload(t *testing.T) {
	job := loadJob(t, seedJob)
	w, err := Workload(job, func(name string) (string, bool) { return "8", name == "STORM_THREADS" })
	if err != nil {
		t.Fatal(err)
	}
	if cpuText(w.CPUs) != "1-16,33-48" || cpuText(w.Housekeeping) != "0,17-32,49-63" || cpuText(w.LoadCPUs) != "0,17-32,49-63" {
		t.Errorf("cpus %v housekeeping %v load %v", w.CPUs, w.Housekeeping, w.LoadCPUs)
	}
	if w.Period != time.Second || w.Runtime != 950*time.Millisecond || w.NoiseThreshold != time.Microsecond || w.Duration != time.Minute {
		t.Errorf("%+v", w)
	}
	if strings.Join(w.Env, " ") != "STORM_THREADS=8" || strings.Contains(w.Script(), "STORM_THREADS=8") {
		t.Errorf("env %v", w.Env)
	}
	if !strings.Contains(w.Script(), "put 1-16,33-48 osnoise/cpus") {
		t.Errorf("script:\n%s", w.Script())
	}
	if _, err := Workload(job, func(string) (string, bool) { return "", false }); err == nil || !strings.Contains(err.Error(), "STORM_THREADS is not set") {
		t.Errorf("got %v", err)
	}
	r, err := Rule(job, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != noise.Absolute || r.Threshold != 20e3 || r.MetricKind != noise.KindTime || !r.HigherIsBad || r.MinSamples != 3 || r.MaxSamples != 10 || r.Confidence != 0.95 {
		t.Errorf("%+v", r)
	}
}

func cpuText(c []int) string { return configs.CPUs(c).String() }

func TestRulesFollowTheThresholdKind(t *testing.T) {
	for threshold, kind := range map[string]noise.ThresholdKind{"auto": noise.Auto, "3x": noise.Ratio, "20us": noise.Absolute} {
		job := loadJob(t, strings.Replace(seedJob, "threshold: 20us", "threshold: "+threshold, 1))
		r, err := Rule(job, []float64{1, 2}, []float64{5, 6})
		if err != nil || r.Kind != kind {
			t.Errorf("%s: %+v %v", threshold, r, err)
		}
	}
	avail := loadJob(t, strings.Replace(seedJob, "threshold: 20us", "metric: availability, threshold: 99%", 1))
	r, err := Rule(avail, nil, nil)
	if err != nil || r.HigherIsBad || r.Threshold != 99 || r.MetricKind != noise.KindPercent {
		t.Errorf("availability: %+v %v", r, err)
	}
}

func TestMeasureStopsWhenTheRuleIsSure(t *testing.T) {
	bin := t.TempDir()
	fixture, _ := filepath.Abs("../noise/testdata/lab612rt-smp2-oslat.txt")
	if err := os.WriteFile(filepath.Join(bin, "oslat"), []byte("#!/bin/sh\necho run >> '"+bin+"/runs'\ncat '"+fixture+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	job := loadJob(t, `apiVersion: kbisect/v1
kind: Job
machine: {name: vm, cpus: 2}
boot: {method: qemu, params: nohz_full=1 isolcpus=1}
build: {tree: /}
workload: {tool: oslat, duration: 1s}
verdict: {threshold: 2ms, samples: {min: 3, max: 8}}
`)
	var seen []float64
	res, err := Measure(context.Background(), job, shell.LocalRunner{}, 0, func(i int, m *noise.Measurement, v float64) { seen = append(seen, v) })
	if err != nil {
		t.Fatal(err)
	}
	runs, _ := os.ReadFile(filepath.Join(bin, "runs"))
	if res.Decision == nil || res.Decision.Verdict != verdict.Good || len(res.Values) != 3 || strings.Count(string(runs), "run") != 3 || len(seen) != 3 || seen[0] != 507e3 {
		t.Errorf("decision %+v, values %v, runs %q", res.Decision, res.Values, runs)
	}
}
