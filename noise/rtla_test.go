package noise

import (
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// rtlaFixtures are the real and documented rtla outputs in testdata (see
// ../../shared/fixtures/noise/README.md for where each comes from).
var rtlaFixtures = []string{
	// The timerlat tracer's own trace, which ParseRtlaTimerlat reads too.
	"kernel-doc_timerlat-tracer_trace.txt",
	"lab612rt-smp2-timerlat-trace-head.txt",
	"kernel-doc_timerlat-tracer_with_osnoise_events_RT.txt",
	"lab612rt-smp2-inject-rtla-osnoise-hist.txt",
	"lab612rt-smp2-inject-rtla-osnoise-top.txt",
	"lab612rt-smp2-inject-rtla-timerlat-top.txt",
	"lab612rt-smp2-rtla-osnoise-hist.txt",
	"lab612rt-smp2-rtla-osnoise-top.txt",
	"lab612rt-smp2-rtla-timerlat-top.txt",
	"lkml-2023-01_ziegler_osnoise-hist_int-avg-bug.txt",
	"lkml-2024-04-24_bristot_timerlat-hist_ALL_summary.txt",
	"lkml-2024-04-24_bristot_timerlat-top_ansi_not_tty.txt",
	"lkml-2025-01_glozar_timerlat-hist_empty_after_aborted_u_run.txt",
	"lkml-2025-03_glozar_osnoise-hist_float-avg_stop.txt",
	"lkml-2025_glozar_timerlat-hist_user_ALL_bpf-action.txt",
	"rtla-doc-6.1era_timerlat-top_stop.txt",
	"rtla-doc_hwnoise.txt",
	"rtla-doc_osnoise-hist.txt",
	"rtla-doc_osnoise-top_q.txt",
	"rtla-doc_timerlat-top_aa.txt",
	"rtla-doc_timerlat-top_stop-tracing_trace_tail.txt",
	"rtla61_help.txt",
	"rtla61_osnoise_hist_help.txt",
	"rtla61_osnoise_hist_no_tracer.txt",
	"rtla61_osnoise_top_help.txt",
	"rtla61_osnoise_top_no_tracefs.txt",
	"rtla61_osnoise_top_no_tracer.txt",
	"rtla61_osnoise_top_no_tracer_nocpus.txt",
	"rtla61_timerlat_hist_help.txt",
	"rtla61_timerlat_hist_no_tracer_nocpus.txt",
	"rtla61_timerlat_top_help.txt",
	"rtla61_timerlat_top_no_tracer.txt",
}

const rtlaUS = time.Microsecond

func rtlaMustParse(t *testing.T, parse func([]byte) (*Measurement, error), out []byte) *Measurement {
	t.Helper()
	m, err := parse(out)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return m
}

// rtlaCPUResult returns CPU n of m, failing the test when it is absent.
func rtlaCPUResult(t *testing.T, m *Measurement, n int) CPU {
	t.Helper()
	for _, c := range m.CPUs {
		if c.CPU == n {
			return c
		}
	}
	t.Fatalf("no CPU %d in %+v", n, m.CPUs)
	return CPU{}
}

func rtlaCPUNumbers(m *Measurement) []int {
	var n []int
	for _, c := range m.CPUs {
		n = append(n, c.CPU)
	}
	return n
}

func TestRtlaRejectsFailedRunsHelpTextsAndOtherFiles(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		line    int
		msg     string
	}{
		{"rtla61_help.txt", 2, "help text"},
		{"rtla61_osnoise_hist_help.txt", 1, "help text"},
		{"rtla61_osnoise_top_help.txt", 1, "help text"},
		{"rtla61_timerlat_hist_help.txt", 1, "help text"},
		{"rtla61_timerlat_top_help.txt", 1, "help text"},
		{"rtla61_osnoise_hist_no_tracer.txt", 1, "rtla reported an error"},
		{"rtla61_osnoise_top_no_tracer.txt", 1, "rtla reported an error"},
		{"rtla61_timerlat_top_no_tracer.txt", 1, "rtla reported an error"},
		{"rtla61_osnoise_top_no_tracefs.txt", 1, "the kernel lacks the tracer"},
		{"rtla61_osnoise_top_no_tracer_nocpus.txt", 1, "the kernel lacks the tracer"},
		{"rtla61_timerlat_hist_no_tracer_nocpus.txt", 1, "the kernel lacks the tracer"},
		// The trace file rtla -t saves is not rtla's report.
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			out := fixture(t, tc.fixture)
			for _, parse := range []func([]byte) (*Measurement, error){ParseRtlaOsnoise, ParseRtlaTimerlat} {
				m, err := parse(out)
				if m != nil {
					t.Fatalf("got a result %+v", m)
				}
				wantParseError(t, err, tc.line, tc.msg)
			}
		})
	}
}

func TestRtlaRejectsEmptyOutput(t *testing.T) {
	for _, out := range []string{"", "\n", " \r\n\n", "\x1b[0;0;0m\n"} {
		for _, parse := range []func([]byte) (*Measurement, error){ParseRtlaOsnoise, ParseRtlaTimerlat} {
			_, err := parse([]byte(out))
			wantParseError(t, err, 0, "empty output")
		}
	}
}

func TestRtlaRejectsTheOtherToolsOutput(t *testing.T) {
	_, err := ParseRtlaOsnoise(fixture(t, "lab612rt-smp2-rtla-timerlat-top.txt"))
	wantParseError(t, err, 1, "this is rtla timerlat output, not rtla osnoise")
	_, err = ParseRtlaTimerlat(fixture(t, "rtla-doc_osnoise-hist.txt"))
	wantParseError(t, err, 2, "this is rtla osnoise output, not rtla timerlat")
	_, err = ParseRtlaTimerlat(fixture(t, "lkml-2025-03_glozar_osnoise-hist_float-avg_stop.txt"))
	wantParseError(t, err, 2, `"CPU-000" is not a column of an rtla timerlat histogram`)
}

func TestRtlaReadsCRLFLikeLF(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		parse   func([]byte) (*Measurement, error)
	}{
		{"lab612rt-smp2-rtla-osnoise-top.txt", ParseRtlaOsnoise},
		{"rtla-doc_osnoise-hist.txt", ParseRtlaOsnoise},
		{"lkml-2024-04-24_bristot_timerlat-hist_ALL_summary.txt", ParseRtlaTimerlat},
	} {
		lf := fixture(t, tc.fixture)
		crlf := []byte(strings.ReplaceAll(string(lf), "\n", "\r\n"))
		want, got := rtlaMustParse(t, tc.parse, lf), rtlaMustParse(t, tc.parse, crlf)
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s: CRLF gives %+v, LF %+v", tc.fixture, got, want)
		}
	}
}

// rtlaCheckInvariants holds for every result: CPUs sorted and unique, each
// with the fields its tool fills, and latencies that make sense.
func rtlaCheckInvariants(t *testing.T, m *Measurement, tool string) {
	t.Helper()
	if m.Tool != tool {
		t.Fatalf("tool %q, want %q", m.Tool, tool)
	}
	if len(m.CPUs) == 0 {
		t.Fatal("a result without CPUs")
	}
	if !sort.SliceIsSorted(m.CPUs, func(i, j int) bool { return m.CPUs[i].CPU < m.CPUs[j].CPU }) {
		t.Fatalf("CPUs not sorted: %v", rtlaCPUNumbers(m))
	}
	for i, c := range m.CPUs {
		if i > 0 && m.CPUs[i-1].CPU == c.CPU {
			t.Fatalf("CPU %d twice", c.CPU)
		}
		if tool == ToolRtlaOsnoise {
			rtlaCheckOsnoise(t, c)
		}
		if tool == ToolRtlaTimerlat && (c.Osnoise != nil || c.Latency == nil && c.IRQLatency == nil && c.UserLatency == nil) {
			t.Fatalf("CPU %d: %+v is not a timerlat result", c.CPU, c)
		}
		for _, l := range []*Latency{c.Latency, c.IRQLatency, c.UserLatency} {
			if l != nil && (l.Samples <= 0 || l.Min > l.Max || l.Min < 0) {
				t.Fatalf("CPU %d: latency %+v", c.CPU, *l)
			}
		}
	}
}

// rtlaCheckOsnoise holds for both layouts: top fills Osnoise alone, hist
// the single-noise Latency and its maximum as MaxSingle.
func rtlaCheckOsnoise(t *testing.T, c CPU) {
	t.Helper()
	o := c.Osnoise
	switch {
	case o == nil || c.IRQLatency != nil || c.UserLatency != nil:
		t.Fatalf("CPU %d: %+v is not an osnoise result", c.CPU, c)
	case c.Latency != nil && (o.MaxSingle != c.Latency.Max || o.Periods != 0):
		t.Fatalf("CPU %d: hist result %+v %+v", c.CPU, o, c.Latency)
	case o.Available < 0 || o.Available > 100 || o.MinAvailable != o.Available:
		t.Fatalf("CPU %d: available %v, min %v", c.CPU, o.Available, o.MinAvailable)
	}
}

func rtlaFuzz(f *testing.F, parse func([]byte) (*Measurement, error), tool string) {
	for _, name := range rtlaFixtures {
		f.Add(fixture(f, name))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		m, err := parse(out)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || m != nil {
				t.Fatalf("got %v, %v; want only a *ParseError", m, err)
			}
			if pe.Line < 0 || pe.Line > strings.Count(string(out), "\n")+1 {
				t.Fatalf("error on line %d of a %d-byte output", pe.Line, len(out))
			}
			return
		}
		rtlaCheckInvariants(t, m, tool)
	})
}

func FuzzParseRtlaOsnoise(f *testing.F) { rtlaFuzz(f, ParseRtlaOsnoise, ToolRtlaOsnoise) }

func FuzzParseRtlaTimerlat(f *testing.F) { rtlaFuzz(f, ParseRtlaTimerlat, ToolRtlaTimerlat) }

func TestRtlaFixturesThatParseKeepTheInvariants(t *testing.T) {
	for _, name := range rtlaFixtures {
		out := fixture(t, name)
		if m, err := ParseRtlaOsnoise(out); err == nil {
			rtlaCheckInvariants(t, m, ToolRtlaOsnoise)
		}
		if m, err := ParseRtlaTimerlat(out); err == nil {
			rtlaCheckInvariants(t, m, ToolRtlaTimerlat)
		}
	}
}

func TestRtlaErrorsNameTheLineAndWhy(t *testing.T) {
	_, err := ParseRtlaOsnoise(fixture(t, "lab612rt-smp2-rtla-osnoise-hist.txt"))
	want := `rtla-osnoise output, line 61: expected a bucket row or over: ("(hist total lines: 104)")`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	_, err = ParseRtlaTimerlat([]byte("rtla needs root permission\n"))
	wantParseError(t, err, 1, "rtla reported an error")
}

func TestRtlaKeepsMissedEventsAsWarnings(t *testing.T) {
	missed := "1024 (0.37%) events missed, results might not be accurate"
	out := string(fixture(t, "lab612rt-smp2-rtla-timerlat-top.txt")) + missed + "\n"
	m := rtlaMustParse(t, ParseRtlaTimerlat, []byte(out))
	if !reflect.DeepEqual(m.Warnings, []string{missed}) || len(m.CPUs) != 1 {
		t.Fatalf("warnings %q, CPUs %v", m.Warnings, rtlaCPUNumbers(m))
	}
}

func TestRtlaRefusesAnErrorPrintedBesideATable(t *testing.T) {
	out := "Could not set /dev/cpu_dma_latency.\n" + string(fixture(t, "lab612rt-smp2-rtla-timerlat-top.txt"))
	_, err := ParseRtlaTimerlat([]byte(out))
	wantParseError(t, err, 1, "rtla reported an error")
}
