package simlab_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kbisect/configs"
	"kbisect/internal/simhost"
	"kbisect/internal/simlab"
	"kbisect/internal/simnoise"
	"kbisect/kbuild"
	"kbisect/lab"
	"kbisect/remote"
	"kbisect/verdict"
)

// newLab makes a small lab and loads its job file.
func newLab(t *testing.T, opt simlab.Options) (*simlab.Lab, *configs.Job) {
	t.Helper()
	l, err := simlab.New(t.TempDir(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	job, err := configs.Load(l.JobFile, configs.LoadOptions{Home: t.TempDir(), LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	return l, job
}

func TestTheLabsJobFileDescribesTheLab(t *testing.T) {
	t.Parallel()
	l, job := newLab(t, simlab.Options{Seed: 5, Commits: 80})
	for _, w := range job.Warnings {
		t.Errorf("warning: %s: %s", w.Key, w.Msg)
	}
	isolated, _ := configs.ParseCPUs(simlab.IsolatedCPUs, simlab.CPUs)
	switch {
	case job.Machine.CPUs != 64 || job.Host.Address != "127.0.0.1" || job.Host.Port != l.Host.Port || string(job.Host.Identity) != l.Identity:
		t.Errorf("machine and host: %+v %+v", job.Machine, job.Host)
	case job.Boot.Method != configs.BootKexec || job.Boot.Params != simlab.BootParams || string(job.Boot.PowerCycle) != l.Host.PowerCycleCommand:
		t.Errorf("boot: %+v", job.Boot)
	case string(job.Build.Tree) != l.Tree.Dir || job.Build.Config != "tinyconfig" || len(job.Build.Fragments) != 1 || string(job.Build.CacheDir) != l.CacheDir:
		t.Errorf("build: %+v", job.Build)
	case job.Workload.Tool != "osnoise" || !slices.Equal(job.Workload.CPUs, isolated) || job.Workload.Duration.D() != 10*time.Second:
		t.Errorf("workload: %+v", job.Workload)
	case job.Verdict.Metric != "noise" || job.Verdict.Threshold.Time != time.Millisecond || l.Metric != simlab.DefaultMetric || l.Threshold != simlab.DefaultThreshold:
		t.Errorf("verdict: %+v", job.Verdict)
	}
	if !lab.RequiresPreemptRT(job) {
		t.Error("the job's kernels need not run PREEMPT_RT")
	}
	if got := l.Host.Running(); got.Release != simlab.DefaultRelease || got.Noise != simlab.DefaultGoodNoise {
		t.Errorf("the host runs %+v", got)
	}
}

// imageLevel returns the noise level an artifact's image carries.
func imageLevel(t *testing.T, a *kbuild.Artifact) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(a.Dir, "bzImage"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(b, []byte(simhost.NoiseMarker))
	if !ok {
		t.Fatalf("%s carries no noise level", a.Dir)
	}
	level, _, _ := bytes.Cut(rest, []byte{0})
	return string(level)
}

// TestAKernelCarriesItsNoiseFromBuildToMeasurement follows the
// endpoints through the real pipeline: kbuild builds them from the
// lab's job, the host measures its default kernel as good, then boots
// the bad kernel and measures it as bad.
func TestAKernelCarriesItsNoiseFromBuildToMeasurement(t *testing.T) {
	t.Parallel()
	l, job := newLab(t, simlab.Options{Seed: 3, Commits: 120})
	ctx := context.Background()
	o := lab.BuildOptions(job, io.Discard)
	good, err := kbuild.Build(ctx, o, 0, l.Tree.GoodCommit)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := kbuild.Build(ctx, o, 0, l.Tree.BadCommit)
	if err != nil {
		t.Fatal(err)
	}
	if g, b := imageLevel(t, good), imageLevel(t, bad); g != "3" || b != "17" {
		t.Errorf("the images carry %s µs (good) and %s µs (bad)", g, b)
	}
	var be *kbuild.BuildError
	if _, err := kbuild.Build(ctx, o, 0, l.Tree.Broken[0]); !errors.As(err, &be) {
		t.Errorf("a broken commit built: %v", err)
	}

	h, err := lab.DialHost(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	res, err := lab.Measure(ctx, job, h, 0, nil)
	h.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The job decides on the noise per period: a quiet kernel's is tens
	// of µs.
	if res.Decision == nil || res.Decision.Verdict != verdict.Good || len(res.Values) != 3 || slices.Max(res.Values) > 100e3 || slices.Min(res.Values) < 2e3 {
		t.Errorf("the default kernel: %+v %v", res.Decision, res.Values)
	}

	art, err := remote.LoadArtifact(bad.Dir)
	if err != nil {
		t.Fatal(err)
	}
	nh, facts, err := lab.BootArtifact(ctx, job, art, hostBase(t, ctx, job), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	if facts.Release != bad.Release || !facts.PreemptRT || l.Host.Running().Noise != 17*time.Microsecond {
		t.Errorf("booted %+v; the host runs %+v", facts, l.Host.Running())
	}
	res, err = lab.Measure(ctx, job, nh, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The storm: ~49 ms of noise per 950 ms period.
	if res.Decision == nil || res.Decision.Verdict != verdict.Bad || slices.Min(res.Values) < 40e6 || slices.Max(res.Values) > 60e6 {
		t.Errorf("the bad kernel: %+v %v", res.Decision, res.Values)
	}
}

func TestADocumentationCommitBuildsTheSameKernel(t *testing.T) {
	t.Parallel()
	tree, err := simlab.NewTree(filepath.Join(t.TempDir(), "tree"), simlab.Options{Seed: 9, Commits: 80})
	if err != nil {
		t.Fatal(err)
	}
	var doc, parent string
	for _, d := range tree.DocOnly {
		if p := gitOut(t, tree.Dir, "rev-parse", d+"^"); tree.Builds(p) {
			doc, parent = d, p
			break
		}
	}
	if doc == "" {
		t.Fatal("no documentation commit with a parent that builds")
	}
	o := kbuild.Options{Tree: tree.Dir, Base: "tinyconfig", Jobs: 2, CacheDir: t.TempDir()}
	a, err := kbuild.Build(context.Background(), o, 0, parent)
	if err != nil {
		t.Fatal(err)
	}
	b, err := kbuild.Build(context.Background(), o, 0, doc)
	if err != nil {
		t.Fatal(err)
	}
	if a.Signature != b.Signature || a.Release == b.Release {
		t.Errorf("signatures %s %s, releases %s %s", a.Signature, b.Signature, a.Release, b.Release)
	}
}

func TestEveryHostOfTheLabMeasuresWithItsNoiseModel(t *testing.T) {
	t.Parallel()
	model := simnoise.Model{Spread: 0.1, BootSpread: 0.2, BadBoots: 0.05}
	l, _ := newLab(t, simlab.Options{Seed: 5, Commits: 80, Noise: model})
	if _, _, err := l.AddHost(); err != nil {
		t.Fatal(err)
	}
	want := simhost.NoiseModel{Model: model, Good: simlab.DefaultGoodNoise, Bad: simlab.DefaultBadNoise}
	for _, h := range append([]*simhost.Host{l.Host}, l.Hosts...) {
		if got := h.NoiseModel(); got != want {
			t.Errorf("a host measures with %+v, want %+v", got, want)
		}
	}
	var desc bytes.Buffer
	l.Describe(&desc, time.Second, 2)
	if !strings.Contains(desc.String(), "  noise:   as real machines have it, "+model.String()+":\n") {
		t.Errorf("the description does not say the noise:\n%s", desc.String())
	}
	plain, _ := newLab(t, simlab.Options{Seed: 5, Commits: 80})
	desc.Reset()
	plain.Describe(&desc, time.Second, 1)
	if got := plain.Host.NoiseModel(); got.Model != (simnoise.Model{}) || strings.Contains(desc.String(), "noise:") {
		t.Errorf("a lab without a model: %+v\n%s", got, desc.String())
	}
	if _, err := simlab.New(t.TempDir(), simlab.Options{Noise: simnoise.Model{BadBoots: 0.7}}); err == nil || !strings.Contains(err.Error(), "simlab: noise: bad-boots 0.7") {
		t.Errorf("a lab with 70%% bad boots: %v", err)
	}
}

// A lab without storms judges 7 µs against 15 µs by the longest single
// noise, with the threshold between them, on every host.
func TestALabWithoutStormsJudgesTheLongestSingleNoise(t *testing.T) {
	t.Parallel()
	l, job := newLab(t, simlab.Options{Seed: 3, Commits: 120, GoodNoise: 7 * time.Microsecond, BadNoise: 15 * time.Microsecond, NoStorm: true})
	if _, _, err := l.AddHost(); err != nil {
		t.Fatal(err)
	}
	if job.Verdict.Metric != "max_single_noise" || job.Verdict.Threshold.Time != 10*time.Microsecond || l.Metric != "max_single_noise" || l.Threshold != 10*time.Microsecond {
		t.Errorf("verdict: %+v; the lab says %s %v", job.Verdict, l.Metric, l.Threshold)
	}
	for _, h := range append([]*simhost.Host{l.Host}, l.Hosts...) {
		if !h.NoStorm() {
			t.Error("a host of the lab storms")
		}
	}
	var desc bytes.Buffer
	l.Describe(&desc, time.Second, 2)
	if !strings.Contains(desc.String(), "after it interruptions of ~15µs, no storm") {
		t.Errorf("the description:\n%s", desc.String())
	}

	ctx := context.Background()
	bad, err := kbuild.Build(ctx, lab.BuildOptions(job, io.Discard), 0, l.Tree.BadCommit)
	if err != nil {
		t.Fatal(err)
	}
	art, err := remote.LoadArtifact(bad.Dir)
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := lab.BootArtifact(ctx, job, art, hostBase(t, ctx, job), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	res, err := lab.Measure(ctx, job, h, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Bad by its longest single noise, ~15 µs, not by a storm's.
	if res.Decision == nil || res.Decision.Verdict != verdict.Bad || slices.Min(res.Values) < 10e3 || slices.Max(res.Values) > 25e3 {
		t.Errorf("the bad kernel: %+v %v", res.Decision, res.Values)
	}
	plain, _ := newLab(t, simlab.Options{Seed: 3, Commits: 80, GoodNoise: 7 * time.Microsecond, BadNoise: 15 * time.Microsecond})
	if plain.Metric != simlab.DefaultMetric || plain.Host.NoStorm() {
		t.Errorf("a lab with storms: %s, no storm %v", plain.Metric, plain.Host.NoStorm())
	}
}

// hostBase is the base command line of the job's host at this first
// contact.
func hostBase(t *testing.T, ctx context.Context, job *configs.Job) string {
	t.Helper()
	h, err := lab.DialHost(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	base, err := lab.HostBase(ctx, job, h)
	if err != nil {
		t.Fatal(err)
	}
	return base.Cmdline
}
