package noise

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestOsnoiseTraceOfAReal612RTKernelSumsItsPeriods(t *testing.T) {
	m, err := ParseOsnoise(fixture(t, "lab612rt-smp2-osnoise-trace.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.CPUs) != 1 || m.CPUs[0].CPU != 1 {
		t.Fatalf("CPUs %+v", m.CPUs)
	}
	o := m.CPUs[0].Osnoise
	// Four periods of 1 s, the first with 18437 us of noise and a
	// 1002 us single noise (the worst of the run).
	if o.Periods != 4 || o.Runtime != 4*time.Second || o.MaxSingle != 1002*time.Microsecond || o.MaxNoise != 18437*time.Microsecond {
		t.Errorf("periods %d runtime %v max single %v max noise %v", o.Periods, o.Runtime, o.MaxSingle, o.MaxNoise)
	}
	if o.Noise != (18437+7165+7598+7861)*time.Microsecond || o.HW != 1216+502+549+585 || o.IRQ != 6+5+4+4 || o.Thread != 2+1+1+1 || o.SIRQ != 0 {
		t.Errorf("noise %v hw %d irq %d thread %d sirq %d", o.Noise, o.HW, o.IRQ, o.Thread, o.SIRQ)
	}
	if o.MinAvailable != 98.1563 || o.Available != 98.97347 {
		t.Errorf("min available %v, available %v", o.MinAvailable, o.Available)
	}
	if m.Tainted || m.StopHit || len(m.Warnings) > 0 {
		t.Errorf("flags %+v", m)
	}
}

func TestThePlantedRegressionShowsInMaxSingleNoise(t *testing.T) {
	clean, err := ParseOsnoise(fixture(t, "lab612rt-smp2-osnoise-trace.txt"))
	if err != nil {
		t.Fatal(err)
	}
	bad, err := ParseOsnoise(fixture(t, "lab612rt-smp2-inject-osnoise-trace.txt"))
	if err != nil {
		t.Fatal(err)
	}
	c, b := clean.CPUs[0].Osnoise, bad.CPUs[0].Osnoise
	if b.MaxSingle != 6271*time.Microsecond || b.MaxSingle < 6*c.MaxSingle {
		t.Errorf("max single: clean %v, injected %v", c.MaxSingle, b.MaxSingle)
	}
}

func TestOsnoisePrefixVariants(t *testing.T) {
	for name, want := range map[string]struct {
		cpus      int
		cpu       int
		maxSingle time.Duration
		irq       Count
	}{
		"kernel-doc_osnoise-tracer_trace_5.14.txt":                    {8, 7, 107 * time.Microsecond, 1016},
		"lkml-2021-07-18_bristot_osnoise_trace_PREEMPT_RT_7flags.txt": {5, 2, 118 * time.Microsecond, 1016},
	} {
		m, err := ParseOsnoise(fixture(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(m.CPUs) != want.cpus {
			t.Fatalf("%s: %d CPUs", name, len(m.CPUs))
		}
		o := m.CPUs[want.cpu].Osnoise
		if m.CPUs[want.cpu].CPU != want.cpu || o.MaxSingle != want.maxSingle || o.IRQ != want.irq || o.Periods != 1 {
			t.Errorf("%s: CPU %d %+v", name, m.CPUs[want.cpu].CPU, o)
		}
	}
	// Options that change the prefix: record-tgid, noirq-info, a clock
	// without a dot, and comm names with dashes and spaces.
	for _, line := range []string{
		"           <...>-859     (  859) [003] ....    81.637220: 1000000        190  99.98100       9     18      0   1007     18      1",
		"           <...>-859     [003]    81.637220: 1000000        190  99.98100       9     18      0   1007     18      1",
		"           <...>-859     [003] ....  81637220123: 1000000        190  99.98100       9     18      0   1007     18      1",
		"   my task-name-2-859     [003] d..h2..    81.637220: 1000000        190  99.98100       9     18      0   1007     18      1",
	} {
		m, err := ParseOsnoise([]byte(line + "\n"))
		if err != nil {
			t.Errorf("%q: %v", line, err)
			continue
		}
		o := m.CPUs[0].Osnoise
		if m.CPUs[0].CPU != 3 || o.Noise != 190*time.Microsecond || o.MaxSingle != 9*time.Microsecond || o.Thread != 1 || o.HW != 18 {
			t.Errorf("%q: %+v", line, o)
		}
	}
}

func TestTheSeedTableIsReadByPosition(t *testing.T) {
	m, err := ParseOsnoise(fixture(t, "seed-000-spinlock-table.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.CPUs) != 6 || m.CPUs[0].CPU != 1 || m.CPUs[5].CPU != 33 {
		t.Fatalf("CPUs %+v", m.CPUs)
	}
	// "[001] 950000 50163 94.719% 14 0 6864 0 5922": 50163 us is the
	// period's total noise (the availability says so), 14 us the longest.
	o := m.CPUs[0].Osnoise
	if o.Noise != 50163*time.Microsecond || o.MaxSingle != 14*time.Microsecond || o.IRQ != 6864 || o.Thread != 5922 || o.MinAvailable != 94.719 {
		t.Errorf("CPU 1: %+v", o)
	}
	good, err := ParseOsnoise(fixture(t, "seed-000-rwlock-table.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if g := good.CPUs[3].Osnoise; good.CPUs[3].CPU == 8 && (g.Noise != 7*time.Microsecond || g.MaxSingle != 7*time.Microsecond) {
		t.Errorf("reverted CPU 8: %+v", g)
	}
	// Without its header the layout is not taken for granted.
	rows := strings.SplitN(string(fixture(t, "seed-000-rwlock-table.txt")), "\n", 2)[1]
	if _, err := ParseOsnoise([]byte(rows)); err == nil {
		t.Error("rows without the seed's header were read")
	}
}

func TestOsnoiseFlagsTaintedStopsAndLostEvents(t *testing.T) {
	out := "# osnoise is tainted!\n# tracer: osnoise\n" +
		"CPU:3 [LOST 12 EVENTS]\n" +
		"       osnoise/3-859     [003] ....    81.637220: 1000000        190  99.98100       9     18      0   1007     18      1\n" +
		"       osnoise/3-859     [003] ....    82.637220: osnoise_main: stop tracing hit on cpu 3\n" +
		"       osnoise/3-859     [003] d.h.    82.637225: irq_noise: local_timer:236 start 82.637221000 duration 1845 ns\n"
	m, err := ParseOsnoise([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Tainted || !m.StopHit || len(m.Warnings) != 2 || !strings.Contains(m.Warnings[1], "CPU 3 lost 12 events") {
		t.Errorf("%+v", m)
	}
}

func TestOsnoiseRefusesWhatIsNotItsOutput(t *testing.T) {
	for name, want := range map[string]string{
		"kernel-doc_timerlat-tracer_trace.txt": "line 1: this is the timerlat tracer's output, not osnoise's",
		"tracefs_6.18_trace_nop.txt":           "line 1: this is the nop tracer's output, not osnoise's",
		// Two traces with the writer's words between them, from a mail.
		"lkml-2023-03-16_kozlowski_osnoise_events_PREEMPT_RT.txt": `line 1: not an osnoise summary line, event or comment ("BEFORE:")`,
		"rtla-doc_osnoise-top_q.txt":                              "not an osnoise summary line, event or comment",
	} {
		_, err := ParseOsnoise(fixture(t, name))
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", name, err, want)
		}
	}
	for out, want := range map[string]string{
		"": "no per-period summary lines",
		"       osnoise/3-859     [003] ....    81.637220: 1000000        190  99.98100       9     18      0   1007     18\n":              "line 1: not an osnoise summary line",
		"       osnoise/3-859     [003] ....    81.637220: 1000000        190  99.98100     900     18      0   1007     18      1\n":       "line 1: max single noise 900µs is more than the period's noise 190µs",
		"       osnoise/3-859     [003] ....    81.637220: 1000000    9000000  99.98100       9     18      0   1007     18      1\n":       "noise 9s is more than the runtime 1s",
		"       osnoise/3-859     [003] ....    81.637220: 99999999999999999999 190  99.98100       9     18      0   1007     18      1\n": "not a number kbisect can hold",
	} {
		_, err := ParseOsnoise([]byte(out))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", out, err, want)
		}
	}
}

func FuzzParseOsnoise(f *testing.F) {
	for _, name := range []string{"lab612rt-smp2-osnoise-trace.txt", "kernel-doc_osnoise-tracer_trace_5.14.txt",
		"lkml-2021-07-18_bristot_osnoise_trace_PREEMPT_RT_7flags.txt", "seed-000-spinlock-table.txt", "lab612rt-smp2-osnoise-events-head.txt"} {
		f.Add(fixture(f, name))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		m, err := ParseOsnoise(out)
		if err != nil {
			return
		}
		for i, c := range m.CPUs {
			o := c.Osnoise
			switch {
			case o == nil:
				t.Fatalf("CPU %d without osnoise data", c.CPU)
			case o.Periods == 0: // single noises from events only
				if c.Latency == nil || c.Latency.Max != o.MaxSingle || c.Latency.Min > c.Latency.Avg || c.Latency.Avg > c.Latency.Max {
					t.Fatalf("CPU %d: %+v %+v", c.CPU, o, c.Latency)
				}
			case o.Noise > o.Runtime || o.MaxSingle > o.Runtime || o.MaxNoise > o.Noise:
				t.Fatalf("CPU %d: %+v", c.CPU, o)
			}
			if i > 0 && m.CPUs[i-1].CPU >= c.CPU {
				t.Fatalf("CPUs not sorted and unique: %+v", m.CPUs)
			}
		}
	})
}

func TestOsnoiseEventsAloneGiveTheSingleNoises(t *testing.T) {
	for name, want := range map[string]struct {
		cpu       int
		samples   Count
		maxSingle time.Duration
	}{
		"lab612rt-smp2-osnoise-events-head.txt":        {1, 41, 440516 * time.Nanosecond},
		"lab612rt-smp2-inject-osnoise-events-head.txt": {1, 41, 3726 * time.Nanosecond},
		"kernel-doc_osnoise-tracer_events.txt":         {8, 1, 8812 * time.Nanosecond},
	} {
		m, err := ParseOsnoise(fixture(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c := m.CPUs[0]
		if len(m.CPUs) != 1 || c.CPU != want.cpu || c.Osnoise.MaxSingle != want.maxSingle || c.Osnoise.Periods != 0 || (want.samples > 0 && c.Latency.Samples != want.samples) {
			t.Errorf("%s: CPU %d %+v %+v", name, c.CPU, c.Osnoise, c.Latency)
		}
		if len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], "only the single noises of the sample_threshold events are known") {
			t.Errorf("%s: warnings %q", name, m.Warnings)
		}
		if _, err := m.MetricValues("irq"); err == nil {
			t.Errorf("%s: counters from events alone", name)
		}
	}
}

func TestTheTimerlatTracersOwnTraceIsRead(t *testing.T) {
	m, err := ParseRtlaTimerlat(fixture(t, "kernel-doc_timerlat-tracer_trace.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.CPUs) != 2 || m.CPUs[0].IRQLatency.Max != 932*time.Nanosecond || m.CPUs[0].Latency.Max != 11700*time.Nanosecond || m.CPUs[1].Latency.Samples != 2 {
		t.Errorf("%+v %+v %+v", m.CPUs[0].IRQLatency, m.CPUs[0].Latency, m.CPUs[1].Latency)
	}
	tail, err := ParseRtlaTimerlat(fixture(t, "rtla-doc_timerlat-top_stop-tracing_trace_tail.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !tail.StopHit {
		t.Error("the stop was not seen")
	}
	for _, c := range tail.CPUs {
		if c.CPU == 6 && c.Latency.Max != 30328*time.Nanosecond {
			t.Errorf("CPU 6 thread latency %v", c.Latency.Max)
		}
	}
	for _, name := range []string{"lab612rt-smp2-timerlat-trace-head.txt", "lab612rt-smp2-inject-timerlat-trace-head.txt", "kernel-doc_timerlat-tracer_with_osnoise_events_RT.txt"} {
		if _, err := ParseRtlaTimerlat(fixture(t, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
