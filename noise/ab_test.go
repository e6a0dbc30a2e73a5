package noise

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// osnoiseSample makes one sample of n CPUs from 1 up whose noise is drawn
// around the given medians.
func osnoiseSample(rng *rand.Rand, cpus int, maxSingle, noise lognormal, irq, thread Count) *Measurement {
	m := &Measurement{Tool: ToolOsnoise}
	for c := 1; c <= cpus; c++ {
		n := time.Duration(noise.draw(rng))
		ms := min(time.Duration(maxSingle.draw(rng)), n)
		m.CPUs = append(m.CPUs, CPU{CPU: c, Osnoise: &Osnoise{
			Periods: 1, Runtime: 950 * time.Millisecond, Noise: n, MaxNoise: n, MaxSingle: ms,
			Available: availability(950*time.Millisecond, n), MinAvailable: availability(950*time.Millisecond, n),
			IRQ: irq, Thread: thread,
		}})
	}
	return m
}

// osnoiseKernel is how noisy a kernel's osnoise samples are drawn.
type osnoiseKernel struct {
	name             string
	maxSingle, noise lognormal
	irq, thread      Count
}

// compareOsnoise draws rounds samples of cpus CPUs of each kernel, one of
// A then one of B per round, and compares B with A on metric.
func compareOsnoise(t *testing.T, seed uint64, rounds, cpus int, a, b osnoiseKernel, metric string) *ABReport {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed))
	sa, sb := Side{Name: a.name}, Side{Name: b.name}
	for i := 0; i < rounds; i++ {
		sa.Samples = append(sa.Samples, osnoiseSample(rng, cpus, a.maxSingle, a.noise, a.irq, a.thread))
		sb.Samples = append(sb.Samples, osnoiseSample(rng, cpus, b.maxSingle, b.noise, b.irq, b.thread))
	}
	r, err := CompareAB(sa, sb, metric, "max", 0.95)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestABOfTheSeedsKernelsSaysBIsLessNoisyOnEveryCPU(t *testing.T) {
	r := compareOsnoise(t, 7, 10, 32,
		osnoiseKernel{"spinlock", lognormal{15e3, 0.1, 0}, lognormal{49e6, 0.03, 0}, 6860, 5920},
		osnoiseKernel{"rwlock", lognormal{2e3, 0.5, 0}, lognormal{3e3, 0.5, 0}, 5, 0}, "noise")
	c := r.Comparison
	if !c.Significant() || !c.Exact || c.P >= 0.001 || c.Shift >= 0 || r.CPUs != 32 || r.CPUsBetter != 32 || r.CPUsWorse != 0 {
		t.Fatalf("%+v", r)
	}
	if !strings.HasPrefix(r.Conclusion, "B is ") || !strings.Contains(r.Conclusion, "× less noisy than A on all 32 CPUs (noise per period: ") || !strings.HasSuffix(r.Conclusion, "p < 0.001") {
		t.Errorf("conclusion %q", r.Conclusion)
	}

}

func TestABOfTwoLikeKernelsFindsNoDifference(t *testing.T) {
	like := osnoiseKernel{"A", lognormal{7e3, 0.3, 0}, lognormal{20e3, 0.3, 0}, 5, 1}
	other := like
	other.name = "B"
	r := compareOsnoise(t, 8, 8, 4, like, other, "max_single_noise")
	if r.Comparison.Significant() || !strings.HasPrefix(r.Conclusion, "no significant difference in max single noise (p = ") {
		t.Errorf("%+v", r)
	}
	if r.Comparison.ShiftLow > 0 || r.Comparison.ShiftHigh < 0 {
		t.Errorf("the interval [%v, %v] excludes no shift", r.Comparison.ShiftLow, r.Comparison.ShiftHigh)
	}
}

func TestABRefusesWhatCannotBeCompared(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	o := osnoiseSample(rng, 2, lognormal{7e3, 0.3, 0}, lognormal{20e3, 0.3, 0}, 5, 1)
	lat := &Measurement{Tool: ToolOslat, CPUs: []CPU{{CPU: 1, Latency: &Latency{Max: time.Microsecond}}}}
	for _, c := range []struct {
		a, b   []*Measurement
		metric string
		want   string
	}{
		{nil, []*Measurement{o}, "noise", "each side needs at least one sample (A has 0, B 1)"},
		{[]*Measurement{o}, []*Measurement{lat}, "noise", "samples of osnoise and oslat cannot be compared"},
		{[]*Measurement{o}, []*Measurement{o}, "max_latency", `osnoise does not report "max_latency"`},
	} {
		if _, err := CompareAB(Side{Name: "A", Samples: c.a}, Side{Name: "B", Samples: c.b}, c.metric, "max", 0.95); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

func TestRatiosAreWrittenWithTwoDigits(t *testing.T) {
	for x, want := range map[float64]string{2.94: "2.9", 41.3: "41", 7184.9: "7,200", 4913: "4,900", 1.0: "1"} {
		if got := ratioText(x); got != want {
			t.Errorf("%v: %q, want %q", x, got, want)
		}
	}
}

func TestABDirectionComesFromUWhenTiesHideTheShift(t *testing.T) {
	mk := func(vals ...float64) []*Measurement {
		var out []*Measurement
		for _, v := range vals {
			out = append(out, &Measurement{Tool: ToolCommand, Numbers: []float64{v}})
		}
		return out
	}
	var a, b []float64
	for i := 0; i < 18; i++ {
		a = append(a, 0)
	}
	for i := 0; i < 12; i++ {
		a = append(a, 5)
	}
	for i := 0; i < 30; i++ {
		b = append(b, 0)
	}
	r, err := CompareAB(Side{Name: "A", Samples: mk(a...)}, Side{Name: "B", Samples: mk(b...)}, "value", "max", 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Comparison.Significant() || r.Comparison.Shift != 0 || !strings.HasPrefix(r.Conclusion, "B is better than A") {
		t.Errorf("shift %v, conclusion %q", r.Comparison.Shift, r.Conclusion)
	}
}
