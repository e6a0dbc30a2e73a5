package simhost_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kbisect/configs"
	"kbisect/internal/simhost"
	"kbisect/noise"
	"kbisect/remote"
)

const (
	labKernel = "6.1.0-28-rt-amd64"
	labParams = "nohz_full=1-16,33-48 isolcpus=nohz,domain,managed_irq,1-16,33-48 rcu_nocbs=1-16,33-48 irqaffinity=0,17-32,49-63"
	isolated  = "1-16,33-48"
)

// lab starts an emulated 64-CPU host on its default kernel and returns
// the options that reach it.
func lab(t *testing.T, seed uint64) (*simhost.Host, remote.Options) {
	t.Helper()
	sim := simhost.Start(t, simhost.Kernel{Release: labKernel, Version: "#1 SMP PREEMPT_RT Debian 6.1.119-1 (2024-11-22)",
		Cmdline: "BOOT_IMAGE=/boot/vmlinuz-" + labKernel + " root=/dev/sda1 ro quiet " + labParams})
	sim.SetSeed(seed)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(sim.KnownHostsLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return sim, remote.Options{Address: "127.0.0.1", Port: sim.Port, User: "root", Identity: sim.Identity, KnownHosts: kh, ConnectTimeout: 2 * time.Second}
}

func dial(t *testing.T, opt remote.Options) *remote.Host {
	t.Helper()
	h, err := remote.Dial(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// seedWorkload is the seed report's measurement, shortened to 10 s.
func seedWorkload(t *testing.T, cpus string) noise.Workload {
	t.Helper()
	list, err := configs.ParseCPUs(cpus, 64)
	if err != nil {
		t.Fatal(err)
	}
	return noise.Workload{Tool: noise.ToolOsnoise, CPUs: list, Duration: 10 * time.Second,
		Period: time.Second, Runtime: 950 * time.Millisecond, NoiseThreshold: time.Microsecond}
}

// summary is a measurement in the numbers the tests look at.
type summary struct {
	median, worst time.Duration // the median and the worst CPU's max single noise
	periodNoise   time.Duration // the worst period's noise
	irq           noise.Count   // the fewest IRQs of any CPU
	periods       int           // the fewest periods of any CPU
}

func summarize(m *noise.Measurement) summary {
	var s summary
	var singles []time.Duration
	s.irq, s.periods = -1, -1
	for _, c := range m.CPUs {
		o := c.Osnoise
		singles = append(singles, o.MaxSingle)
		s.worst, s.periodNoise = max(s.worst, o.MaxSingle), max(s.periodNoise, o.MaxNoise)
		if s.irq < 0 || o.IRQ < s.irq {
			s.irq = o.IRQ
		}
		if s.periods < 0 || o.Periods < s.periods {
			s.periods = o.Periods
		}
	}
	slices.Sort(singles)
	s.median = singles[len(singles)/2]
	return s
}

func TestTheDefaultKernelsTraceParsesAsAQuietKernel(t *testing.T) {
	_, opt := lab(t, 1)
	h := dial(t, opt)
	m, raw, err := seedWorkload(t, isolated).Measure(context.Background(), h)
	if err != nil {
		t.Fatalf("%v\n%s", err, raw.Stdout)
	}
	if len(m.CPUs) != 32 || m.Tool != noise.ToolOsnoise || len(m.Warnings) != 0 {
		t.Fatalf("%d CPUs, tool %s, warnings %v", len(m.CPUs), m.Tool, m.Warnings)
	}
	// The seed's good kernel: a few µs, a handful of IRQs per period.
	s := summarize(m)
	if s.periods != 10 || s.median < 2*time.Microsecond || s.median > 5*time.Microsecond || s.worst > 12*time.Microsecond ||
		s.periodNoise > 40*time.Microsecond || s.irq < 30 || s.irq > 70 {
		t.Errorf("%+v", s)
	}
	for _, c := range m.CPUs {
		if c.Osnoise.Runtime != 10*950*time.Millisecond || c.Osnoise.MinAvailable < 99.99 {
			t.Errorf("CPU %d: %+v", c.CPU, *c.Osnoise)
		}
	}
	if !strings.HasPrefix(string(raw.Stdout), "# tracer: osnoise\n") {
		t.Errorf("trace starts %q", raw.Stdout[:40])
	}
}

func TestABootedImageRunsAtTheNoiseLevelItCarries(t *testing.T) {
	sim, opt := lab(t, 2)
	ctx := context.Background()
	const release = "6.12.78-kbisect-0123456789ab"
	image := filepath.Join(t.TempDir(), "bzImage")
	body := append(make([]byte, 100000), []byte("\x00"+simhost.NoiseMarker+"17\x00")...)
	if err := os.WriteFile(image, body, 0o644); err != nil {
		t.Fatal(err)
	}
	h := dial(t, opt)
	if err := h.Install(ctx, remote.Artifact{Release: release, Image: image}, remote.InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	if l, ok := sim.Noise(release); !ok || l != 17*time.Microsecond {
		t.Fatalf("the host read level %v %v from the image", l, ok)
	}
	nh, _, err := remote.Boot(ctx, h, func(ctx context.Context) (*remote.Host, error) { return remote.Dial(ctx, opt) },
		remote.BootOptions{Method: remote.MethodKexec, Release: release, BaseCmdline: "root=/dev/sda1 ro", Params: labParams, Timeout: 30 * time.Second,
			Expect: remote.Expect{Release: release, Params: labParams, PreemptRT: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	m, _, err := seedWorkload(t, isolated).Measure(ctx, nh)
	if err != nil {
		t.Fatal(err)
	}
	// The seed's bad kernel: 14–20 µs single noises in a storm of ~6,864
	// IRQs per 950 ms, ~49 ms of noise per period, 94.8 % available.
	s := summarize(m)
	if s.median < 14*time.Microsecond || s.median > 20*time.Microsecond || s.worst > 50*time.Microsecond ||
		s.periodNoise < 42*time.Millisecond || s.periodNoise > 56*time.Millisecond || s.irq < 10*6850 {
		t.Errorf("%+v", s)
	}
	for _, c := range m.CPUs {
		if a := c.Osnoise.Available; a < 94 || a > 95.7 {
			t.Errorf("CPU %d available %v%%", c.CPU, a)
		}
	}
}

func TestHousekeepingCPUsAreNoisyAndTheMachineHasItsCPUs(t *testing.T) {
	_, opt := lab(t, 3)
	h := dial(t, opt)
	m, _, err := seedWorkload(t, "0,17").Measure(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if s := summarize(m); s.median < 15*time.Microsecond || s.irq < 10*950 {
		t.Errorf("housekeeping CPUs: %+v", s)
	}
	w := seedWorkload(t, "1")
	w.CPUs = []int{70}
	if _, _, err := w.Measure(context.Background(), h); err == nil || !strings.Contains(err.Error(), "cannot write 70 to /sys/kernel/tracing/osnoise/cpus") {
		t.Errorf("CPU 70 of 64: %v", err)
	}
}

func TestTheSameSeedGivesTheSameSamplesAndSamplesDiffer(t *testing.T) {
	ctx := context.Background()
	var first [2][]byte
	for i := range first {
		_, opt := lab(t, 42)
		h := dial(t, opt)
		w := seedWorkload(t, isolated)
		_, raw, err := w.Measure(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		first[i] = raw.Stdout
		_, next, err := w.Measure(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		if string(next.Stdout) == string(raw.Stdout) {
			t.Error("two samples of one kernel are identical")
		}
	}
	if string(first[0]) != string(first[1]) {
		t.Error("the same seed gave different samples")
	}
}

func TestAMeasurementThatLosesItsConnectionIsTheLabsFailure(t *testing.T) {
	sim, opt := lab(t, 4)
	ctx := context.Background()
	w := seedWorkload(t, isolated)
	sim.DropMeasurement(2)
	h := dial(t, opt)
	if _, _, err := w.Measure(ctx, h); err != nil {
		t.Fatalf("the first measurement: %v", err)
	}
	_, _, err := w.Measure(ctx, h)
	var ie *remote.InfraError
	if !errors.As(err, &ie) {
		t.Fatalf("the second measurement: %T %v", err, err)
	}
	if _, _, err := w.Measure(ctx, dial(t, opt)); err != nil || sim.Measurements() != 3 {
		t.Errorf("after the drop: %v, %d measurements", err, sim.Measurements())
	}
}

func TestAFlakyHostRefusesThenDropsThenAnswers(t *testing.T) {
	sim, opt := lab(t, 5)
	ctx := context.Background()
	sim.RefuseConnections(2)
	for i := 0; i < 2; i++ {
		var ie *remote.InfraError
		if h, err := remote.Dial(ctx, opt); !errors.As(err, &ie) {
			if h != nil {
				h.Close()
			}
			t.Fatalf("connection %d: %T %v", i+1, err, err)
		}
	}
	sim.DropConnections(1)
	h := dial(t, opt)
	_, err := h.Facts(ctx)
	var ie *remote.InfraError
	if !errors.As(err, &ie) {
		t.Fatalf("a dropped connection: %T %v", err, err)
	}
	if f, err := dial(t, opt).Facts(ctx); err != nil || f.Release != labKernel {
		t.Errorf("then: %+v %v", f, err)
	}
}
