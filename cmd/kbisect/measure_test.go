package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeOslat puts an oslat on PATH that prints a real 6.12 PREEMPT_RT
// oslat output with a planted 6 ms regression.
func fakeOslat(t *testing.T) {
	t.Helper()
	bin := t.TempDir()
	out, err := filepath.Abs("../../noise/testdata/lab612rt-smp2-inject-oslat.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "oslat"), []byte("#!/bin/sh\ncat '"+out+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
}

func TestMeasureLocalDecidesWithTheJobsRule(t *testing.T) {
	fakeOslat(t)
	job := jobFile(t, `apiVersion: kbisect/v1
kind: Job
machine: {name: vm, cpus: 2}
host: {address: h}
boot: {method: kexec, params: nohz_full=1 isolcpus=1, power_cycle: pdu 1}
build: {tree: /}
workload: {tool: oslat, duration: 1s}
verdict: {threshold: 2ms, samples: {min: 3, max: 6}}
`)
	code, stdout, stderr := runCLI(t, context.Background(), "measure", "--local", "--job", job)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"Sample 3 (oslat, CPUs 1, 1s):",
		"max_latency of the worst CPU per sample: 6,178 µs, 6,178 µs, 6,178 µs\n",
		"verdict: bad (median 6,178 µs beyond the threshold 2,000 µs, sure at 0.95)\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "Sample 4") || !strings.Contains(stderr, "sample 3: max_latency of the worst CPU: 6,178 µs") {
		t.Errorf("a clear verdict took more than the minimum:\n%s\n%s", stdout, stderr)
	}
}

func TestMeasureLocalWithoutAJobAndInJSON(t *testing.T) {
	fakeOslat(t)
	code, stdout, stderr := runCLI(t, context.Background(), "measure", "--local", "--tool", "oslat", "--cpus", "1", "--duration", "1s", "--samples", "2", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Samples []struct {
			Tool string
			CPUs []struct{ CPU int }
		}
		Values []float64
		Metric string
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if len(res.Samples) != 2 || res.Samples[1].Tool != "oslat" || res.Values[0] != 6178e3 || res.Metric != "max_latency" {
		t.Errorf("%+v", res)
	}
}

func TestMeasureUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"measure", "--tool", "oslat", "--cpus", "1"}, "give --job FILE to measure its lab host over SSH, or --local"},
		{[]string{"measure", "--local"}, "give --job FILE, or --tool and --cpus"},
		{[]string{"measure", "--local", "--tool", "perf", "--cpus", "1"}, "measure --tool perf: one of osnoise"},
		{[]string{"measure", "--local", "--tool", "oslat", "--cpus", "1-x"}, `measure --cpus 1-x: "x" is not a CPU number`},
		{[]string{"measure", "--local", "--tool", "oslat", "--cpus", "1", "--duration", "10"}, "measure --duration 10: give a duration"},
		{[]string{"parse", "--tool", "perf", "x"}, "parse --tool perf: not a tool kbisect parses"},
		{[]string{"parse", "--tool", "oslat"}, "parse: name one file"},
	} {
		code, _, stderr := runCLI(t, context.Background(), c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
}

func TestParsePrintsTheTableAndSaysWhyItCannot(t *testing.T) {
	code, stdout, _ := runCLI(t, context.Background(), "parse", "--tool", "osnoise", "../../noise/testdata/seed-000-spinlock-table.txt")
	if code != exitOK || !strings.Contains(stdout, "max single noise: worst 20 µs (CPU 16), median CPU 14 µs") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
	code, _, stderr := runCLI(t, context.Background(), "parse", "--tool", "oslat", "../../noise/testdata/oslat24_help.txt")
	if code != exitFailure || !strings.Contains(stderr, "oslat24_help.txt: oslat output, line 2: this is oslat's usage text") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}
