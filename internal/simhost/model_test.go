package simhost

import (
	"bytes"
	"math"
	"slices"
	"testing"
	"time"

	"kbisect/internal/simnoise"
	"kbisect/noise"
)

// These tests boot hundreds of times: they boot with comeUp (a kexec
// without its waits) and run the osnoise script through the host's tracer
// straight, without SSH, and read the trace with kbisect's own parser.

const modelParams = "nohz_full=1-16,33-48 isolcpus=nohz,domain,managed_irq,1-16,33-48 rcu_nocbs=1-16,33-48 irqaffinity=0,17-32,49-63"

func modelHost(t *testing.T, seed uint64, n NoiseModel) *Host {
	t.Helper()
	h, err := New(t.TempDir(), Kernel{Release: "6.1.0-28-rt-amd64", Cmdline: "root=/dev/sda1 " + modelParams})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	h.SetSeed(seed)
	if err := h.SetNoiseModel(n); err != nil {
		t.Fatal(err)
	}
	return h
}

// bootAt boots a kernel at level as a kexec does, without the waits.
func bootAt(h *Host, level time.Duration) {
	h.comeUp(Kernel{Release: "6.12.78-kbisect", Cmdline: "root=/dev/sda1 " + modelParams, Noise: level}, FaultNone)
}

// sample is one measurement as a verdict sees it: the median isolated
// CPU's longest single noise (µs) and the worst period's noise.
type sample struct {
	single float64
	period time.Duration
}

var modelWorkload = noise.Workload{Tool: noise.ToolOsnoise, CPUs: []int{1, 2, 3, 4, 5, 6, 7, 8}, Duration: 3 * time.Second,
	Period: time.Second, Runtime: 950 * time.Millisecond, NoiseThreshold: time.Microsecond}

func measure(t *testing.T, h *Host) (sample, []byte) {
	t.Helper()
	var out, errs bytes.Buffer
	if code := h.osnoise(modelWorkload.Script(), nil, &out, &errs); code != 0 {
		t.Fatalf("osnoise: exit %d: %s", code, errs.String())
	}
	m, err := noise.ParseOsnoise(out.Bytes())
	if err != nil || len(m.CPUs) != len(modelWorkload.CPUs) {
		t.Fatalf("the trace does not parse: %v\n%s", err, out.String())
	}
	var s sample
	var singles []float64
	for _, c := range m.CPUs {
		singles = append(singles, micros(c.Osnoise.MaxSingle))
		s.period = max(s.period, c.Osnoise.MaxNoise)
	}
	slices.Sort(singles)
	s.single = singles[len(singles)/2]
	return s, out.Bytes()
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}

func meanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(xs)-1))
}

// bootLevels boots a storm kernel of 100 µs (whole microseconds hardly
// round it) boots times and measures each boot n times: the log of each
// boot's median over the kernel's level, and the mean spread of the logs
// within a boot.
func bootLevels(t *testing.T, h *Host, boots, n int) (logMedians []float64, within float64) {
	for b := 0; b < boots; b++ {
		bootAt(h, 100*time.Microsecond)
		var logs []float64
		for i := 0; i < n; i++ {
			s, _ := measure(t, h)
			logs = append(logs, math.Log(s.single/100))
		}
		logMedians = append(logMedians, median(logs))
		_, sd := meanSD(logs)
		within += sd / float64(boots)
	}
	return logMedians, within
}

func TestBootsOfAModelledHostScatterWithTheBootSpread(t *testing.T) {
	h := modelHost(t, 7, NoiseModel{Model: simnoise.Model{Spread: 0.05, BootSpread: 0.25}})
	logMedians, within := bootLevels(t, h, 80, 5)
	mean, sd := meanSD(logMedians)
	// The boots' medians spread by BootSpread; the samples of one boot
	// by Spread (the worst of a CPU's periods and the CPUs' shares add a
	// little), around the level less the few per cent the CPUs' shares
	// take.
	if sd < 0.2 || sd > 0.3 || within < 0.03 || within > 0.08 || mean < -0.2 || mean > 0.05 {
		t.Errorf("boot medians: mean %.3f, sd %.3f (want 0.25); within a boot sd %.3f (want 0.05)", mean, sd, within)
	}
	// Without the model the host's boots are alike: a storm's level
	// varies by 4 % from sample to sample, not from boot to boot.
	logMedians, _ = bootLevels(t, modelHost(t, 7, NoiseModel{}), 20, 5)
	if _, sd := meanSD(logMedians); sd > 0.05 {
		t.Errorf("without a model boot medians spread by %.3f", sd)
	}
}

func TestBadBootsMeasureAtTheOtherSidesLevelAtTheirRate(t *testing.T) {
	const good, bad = 3 * time.Microsecond, 17 * time.Microsecond
	h := modelHost(t, 11, NoiseModel{Model: simnoise.Model{Spread: 0.1, BadBoots: 0.2}, Good: good, Bad: bad})
	const boots = 200
	other := 0
	var goodSide, badSide []float64 // the boots' medians, as measured
	for b := 0; b < boots; b++ {
		kernelBad := b%2 == 1
		level := good
		if kernelBad {
			level = bad
		}
		bootAt(h, level)
		var singles []float64
		var period time.Duration
		for i := 0; i < 3; i++ {
			s, _ := measure(t, h)
			singles = append(singles, s.single)
			period = max(period, s.period)
		}
		drawnOther := h.noiseBoot.OtherSide
		if drawnOther {
			other++
		}
		// Measured bad: above the levels' geometric mean, and in a storm
		// (the demo's verdict: over 1 ms of noise per period).
		m := median(singles)
		measuredBad := m > math.Sqrt(3*17)
		if measuredBad != (period > time.Millisecond) || measuredBad != (kernelBad != drawnOther) {
			t.Fatalf("boot %d of a kernel at %v, on the other side %v: median %.0fµs, worst period %v", b, level, drawnOther, m, period)
		}
		if measuredBad {
			badSide = append(badSide, m)
		} else {
			goodSide = append(goodSide, m)
		}
	}
	if share := float64(other) / boots; share < 0.14 || share > 0.26 {
		t.Errorf("%.3f of boots on the other side, want 0.2", share)
	}
	if g, b := median(goodSide), median(badSide); g < 2 || g > 4 || b < 14 || b > 19 {
		t.Errorf("the good side measures %.0fµs, the bad side %.0fµs: want 3 and 17", g, b)
	}
}

func TestSpikesAndFlipsOfAModelledHostHitTheirShare(t *testing.T) {
	spiky := modelHost(t, 13, NoiseModel{Model: simnoise.Model{Spikes: 0.1, SpikeMin: 4, SpikeMax: 8}})
	flippy := modelHost(t, 17, NoiseModel{Model: simnoise.Model{Flips: 0.1}, Good: 3 * time.Microsecond, Bad: 17 * time.Microsecond})
	bootAt(spiky, 100*time.Microsecond)
	bootAt(flippy, 3*time.Microsecond)
	const n = 300
	spikes, flips := 0, 0
	for i := 0; i < n; i++ {
		if s, _ := measure(t, spiky); s.single > 300 {
			spikes++
		}
		if s, _ := measure(t, flippy); s.single > 10 && s.period > time.Millisecond {
			flips++
		}
	}
	if s, f := float64(spikes)/n, float64(flips)/n; s < 0.06 || s > 0.14 || f < 0.06 || f > 0.14 {
		t.Errorf("%.3f of samples spiked, %.3f flipped: want 0.1 each", s, f)
	}
}

func TestAModelledHostIsSeeded(t *testing.T) {
	run := func(seed uint64) []byte {
		h := modelHost(t, seed, NoiseModel{Model: simnoise.Model{Spread: 0.2, BootSpread: 0.25, BadBoots: 0.3}, Good: 3 * time.Microsecond, Bad: 17 * time.Microsecond})
		var all []byte
		for b := 0; b < 4; b++ {
			bootAt(h, 3*time.Microsecond)
			for i := 0; i < 2; i++ {
				_, trace := measure(t, h)
				all = append(all, trace...)
			}
		}
		return all
	}
	if a, b := run(5), run(5); !bytes.Equal(a, b) {
		t.Error("the same seed gave different traces")
	}
	if bytes.Equal(run(5), run(6)) {
		t.Error("two seeds gave the same traces")
	}
}

func TestSetNoiseRefusesWhatCannotBe(t *testing.T) {
	h := modelHost(t, 1, NoiseModel{})
	for _, n := range []NoiseModel{
		{Model: simnoise.Model{BadBoots: 0.6}},
		{Model: simnoise.Model{Spread: 0.1}, Good: 17 * time.Microsecond, Bad: 3 * time.Microsecond},
		{Good: 3 * time.Microsecond},
	} {
		if err := h.SetNoiseModel(n); err == nil {
			t.Errorf("SetNoiseModel(%+v) took it", n)
		}
	}
}

// A storm is the regression's, not a level's: a quiet kernel's spike to
// a storm's level stays quiet, and a storming kernel's boot drawn below
// StormLevel still storms.
func TestAMeasurementStormsByItsSideNotItsSize(t *testing.T) {
	const good, bad = 3 * time.Microsecond, 17 * time.Microsecond
	h := modelHost(t, 19, NoiseModel{Model: simnoise.Model{BootSpread: 0.5, Spikes: 0.2, SpikeMin: 5, SpikeMax: 10}, Good: good, Bad: bad})
	spiked, low := 0, 0
	for b := 0; b < 60; b++ {
		level := good
		if b%2 == 1 {
			level = bad
		}
		bootAt(h, level)
		for i := 0; i < 5; i++ {
			s, _ := measure(t, h)
			switch storm := s.period > time.Millisecond; {
			case storm != (level == bad):
				t.Fatalf("boot %d at %v: %.0fµs, worst period %v", b, level, s.single, s.period)
			case level == good && s.single >= micros(StormLevel):
				spiked++
			case level == bad && s.single < micros(StormLevel):
				low++
			}
		}
	}
	if spiked < 10 || low < 10 {
		t.Errorf("%d quiet samples at a storm's level, %d storming ones below it: too few to tell", spiked, low)
	}
}

// A host told SetNoStorm keeps its isolated CPUs quiet at any level, with
// a model or without: a 15 µs kernel differs from a 7 µs one by its
// longest single noise only.
func TestAHostWithoutStormsStaysQuietAtAnyLevel(t *testing.T) {
	const good, bad = 7 * time.Microsecond, 15 * time.Microsecond
	for _, n := range []NoiseModel{{}, {Model: simnoise.Model{Spread: 0.2, BadBoots: 0.05}, Good: good, Bad: bad}} {
		h := modelHost(t, 23, n)
		h.SetNoStorm(true)
		var goods, bads []float64
		for b := 0; b < 20; b++ {
			level := []time.Duration{good, bad}[b%2]
			bootAt(h, level)
			for i := 0; i < 3; i++ {
				s, _ := measure(t, h)
				if s.period > time.Millisecond {
					t.Fatalf("model %+v, boot %d at %v: a storm, worst period %v", n, b, level, s.period)
				}
				if level == good {
					goods = append(goods, s.single)
				} else {
					bads = append(bads, s.single)
				}
			}
		}
		if g, b := median(goods), median(bads); !(g >= 5 && g <= 9 && b >= 11 && b <= 19) {
			t.Errorf("model %+v: median longest single noise %.1fµs at %v, %.1fµs at %v", n, g, good, b, bad)
		}
		h.SetNoStorm(false)
		bootAt(h, bad)
		if s, _ := measure(t, h); n.Model == (simnoise.Model{}) && s.period < time.Millisecond {
			t.Errorf("storms again: worst period %v at %v", s.period, bad)
		}
	}
}
