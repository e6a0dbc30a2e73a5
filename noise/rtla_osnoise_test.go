package noise

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRtlaOsnoiseTopReadsEveryColumnOfThe61Layout(t *testing.T) {
	m := rtlaMustParse(t, ParseRtlaOsnoise, fixture(t, "lab612rt-smp2-rtla-osnoise-top.txt"))
	want := &Measurement{
		Tool:     ToolRtlaOsnoise,
		Duration: 5 * time.Second,
		CPUs: []CPU{{CPU: 1, Osnoise: &Osnoise{
			Periods:      4,
			Runtime:      4 * time.Second,
			Noise:        31618 * rtlaUS,
			MaxNoise:     9845 * rtlaUS,
			MaxSingle:    400 * rtlaUS,
			Available:    99.20955,
			MinAvailable: 99.20955,
			HW:           2077,
			NMI:          0,
			IRQ:          18,
			SIRQ:         0,
			Thread:       5,
		}}},
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got %+v %+v, want %+v", m, m.CPUs[0].Osnoise, want.CPUs[0].Osnoise)
	}
}

func TestRtlaOsnoiseTopShowsThePlantedRegression(t *testing.T) {
	good := rtlaMustParse(t, ParseRtlaOsnoise, fixture(t, "lab612rt-smp2-rtla-osnoise-top.txt"))
	bad := rtlaMustParse(t, ParseRtlaOsnoise, fixture(t, "lab612rt-smp2-inject-rtla-osnoise-top.txt"))
	g, b := rtlaCPUResult(t, good, 1).Osnoise, rtlaCPUResult(t, bad, 1).Osnoise
	if b.MaxSingle != 6227*rtlaUS || b.Noise != 87446*rtlaUS || b.Available != 97.81385 || b.MaxNoise != 34728*rtlaUS {
		t.Fatalf("injected run read as %+v", b)
	}
	if b.MaxSingle <= g.MaxSingle || b.Noise <= g.Noise || b.MaxNoise <= g.MaxNoise || b.Available >= g.Available {
		t.Fatalf("the injected run %+v is not worse than the clean one %+v", b, g)
	}
}

func TestRtlaOsnoiseTopReadsTheDocTableOfFourCPUs(t *testing.T) {
	m := rtlaMustParse(t, ParseRtlaOsnoise, fixture(t, "rtla-doc_osnoise-top_q.txt"))
	if got := rtlaCPUNumbers(m); !reflect.DeepEqual(got, []int{0, 1, 2, 3}) || m.Duration != time.Minute || m.StopHit {
		t.Fatalf("CPUs %v, duration %v, stop %v", got, m.Duration, m.StopHit)
	}
	want := &Osnoise{Periods: 59, Runtime: 53100 * time.Millisecond, Noise: 290842 * rtlaUS, MaxNoise: 6582 * rtlaUS,
		MaxSingle: 39 * rtlaUS, Available: 99.45227, MinAvailable: 99.45227, HW: 855, IRQ: 53110, SIRQ: 1406, Thread: 12}
	if got := rtlaCPUResult(t, m, 2).Osnoise; !reflect.DeepEqual(got, want) {
		t.Fatalf("CPU 2: got %+v, want %+v", got, want)
	}
}

func TestRtlaHwnoiseTopStopsAtNMI(t *testing.T) {
	m := rtlaMustParse(t, ParseRtlaOsnoise, fixture(t, "rtla-doc_hwnoise.txt"))
	if got := rtlaCPUNumbers(m); !reflect.DeepEqual(got, []int{1, 2, 3, 4, 5, 6, 7}) || m.Duration != 10*time.Minute {
		t.Fatalf("CPUs %v, duration %v", got, m.Duration)
	}
	want := &Osnoise{Periods: 599, Runtime: 599 * time.Second, Noise: 138 * rtlaUS, MaxNoise: 3 * rtlaUS,
		MaxSingle: 3 * rtlaUS, Available: 99.99997, MinAvailable: 99.99997, HW: 4, NMI: 74}
	if got := rtlaCPUResult(t, m, 1).Osnoise; !reflect.DeepEqual(got, want) {
		t.Fatalf("CPU 1: got %+v, want %+v", got, want)
	}
}

// rtlaOsnoiseTopRows is the table of lab612rt-smp2-rtla-osnoise-top.txt
// without escapes, for hand-made variants.
const rtlaOsnoiseTopRows = `                                          Operating System Noise
duration:   0 00:00:05 | time is in us
CPU Period       Runtime        Noise  % CPU Aval   Max Noise   Max Single          HW          NMI          IRQ      Softirq       Thread
  1 #4           4000000        31618    99.20955        9845          400        2077            0           18            0            5
`

func TestRtlaOsnoiseTopKeepsTheLastTableOfARefreshingRun(t *testing.T) {
	// Without -q rtla clears the screen (ESC c) and reprints the table.
	first := strings.ReplaceAll(rtlaOsnoiseTopRows, "#4   ", "#1   ")
	out := "\x1bc" + first + "\x1bc" + rtlaOsnoiseTopRows + "osnoise hit stop tracing\n  Saving trace to osnoise_trace.txt\n"
	m := rtlaMustParse(t, ParseRtlaOsnoise, []byte(out))
	if c := rtlaCPUResult(t, m, 1); c.Osnoise.Periods != 4 || len(m.CPUs) != 1 || !m.StopHit {
		t.Fatalf("got %+v, stop %v", c.Osnoise, m.StopHit)
	}
}

func TestRtlaOsnoiseTopRejectsMalformedTables(t *testing.T) {
	row := "  1 #4           4000000        31618    99.20955        9845          400        2077            0           18            0            5\n"
	head := strings.TrimSuffix(rtlaOsnoiseTopRows, row)
	for _, tc := range []struct {
		name string
		out  string
		line int
		msg  string
	}{
		{"header without rows", head, 3, "the table has no CPU rows"},
		{"truncated row", head + "  1 #4           4000000        31618    99.20955        9845\n", 4, "truncated row: 6 of 12 columns"},
		{"extra column", head + strings.TrimSuffix(row, "\n") + " 7\n", 4, "13 columns, the header 12"},
		{"CPU twice", head + row + strings.Replace(row, "#4", "#5", 1), 5, "CPU 1 appears twice (first on line 4)"},
		{"runtime overflows", head + strings.Replace(row, "4000000", "9999999999999999999", 1), 4, `Runtime "9999999999999999999"`},
		{"count overflows", head + strings.Replace(row, "2077", "99999999999999999999", 1), 4, `HW "99999999999999999999"`},
		{"six decimals", head + strings.Replace(row, "99.20955", "99.209550", 1), 4, `% CPU Aval "99.209550"`},
		{"over 100 percent", head + strings.Replace(row, "99.20955", "100.20955", 1), 4, "% CPU Aval"},
		{"period without #", head + strings.Replace(row, "#4", "4 ", 1), 4, `Period "4"`},
		{"negative CPU", head + strings.Replace(row, "  1 #4", " -1 #4", 1), 4, `CPU "-1"`},
		{"row before the header", "  1 #4  4000000\n" + rtlaOsnoiseTopRows, 1, "a CPU row before the column header"},
		{"unknown header", strings.Replace(rtlaOsnoiseTopRows, "Thread", "Threads", 1), 3, "unknown rtla osnoise top column header"},
		{"unknown unit", strings.Replace(rtlaOsnoiseTopRows, "in us", "in ns", 1), 2, "time is in us"},
		{"bad duration", strings.Replace(rtlaOsnoiseTopRows, "00:00:05", "00:61:05", 1), 2, `not rtla's "days hh:mm:ss"`},
		{"junk after the rows", rtlaOsnoiseTopRows + "(hist total lines: 9)\n", 5, "truncated row"},
		{"title without table", "                                          Operating System Noise\n", 1, "ends before the column header"},
		{"last refresh cut short", strings.Replace(rtlaOsnoiseTopRows, row, row+strings.Replace(row, "  1 #", "  2 #", 1), 1) + head + row,
			9, "the last table is shorter than an earlier one (1 CPUs, not 2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseRtlaOsnoise([]byte(tc.out))
			if m != nil {
				t.Fatalf("got a result %+v", m)
			}
			wantParseError(t, err, tc.line, tc.msg)
		})
	}
}

func TestRtlaOsnoiseHistMapsColumnsThroughTheIndexHeader(t *testing.T) {
	m := rtlaMustParse(t, ParseRtlaOsnoise, fixture(t, "rtla-doc_osnoise-hist.txt"))
	if len(m.CPUs) != 12 || m.Duration != time.Minute || m.StopHit || len(m.Warnings) != 0 {
		t.Fatalf("got %d CPUs, duration %v, stop %v, warnings %q", len(m.CPUs), m.Duration, m.StopHit, m.Warnings)
	}
	// The doc ran with -b 10: each label is a bucket's lower edge.
	c := rtlaCPUResult(t, m, 9)
	want := &Latency{Samples: 55052, Min: 0, Avg: 0, Max: 50 * rtlaUS, Histogram: []Bucket{
		{0, 50128}, {10 * rtlaUS, 4836}, {20 * rtlaUS, 53}, {30 * rtlaUS, 31}, {40 * rtlaUS, 3}, {50 * rtlaUS, 1},
	}}
	if !reflect.DeepEqual(c.Latency, want) || !reflect.DeepEqual(c.Osnoise, &Osnoise{MaxSingle: 50 * rtlaUS}) {
		t.Fatalf("CPU 9: got %+v %+v, want %+v", c.Latency, c.Osnoise, want)
	}
	if c0 := rtlaCPUResult(t, m, 0); c0.Latency.Samples != 55215 || c0.Osnoise.MaxSingle != 30*rtlaUS {
		t.Fatalf("CPU 0: got %+v", c0.Latency)
	}
}

func TestRtlaOsnoiseHistReadsFloatAveragesAndTheStop(t *testing.T) {
	m := rtlaMustParse(t, ParseRtlaOsnoise, fixture(t, "lkml-2025-03_glozar_osnoise-hist_float-avg_stop.txt"))
	if !m.StopHit || m.Duration != 0 || !reflect.DeepEqual(rtlaCPUNumbers(m), []int{0, 1}) {
		t.Fatalf("got stop %v, duration %v, CPUs %v", m.StopHit, m.Duration, rtlaCPUNumbers(m))
	}
	want0 := &Latency{Samples: 25, Min: rtlaUS, Avg: 3680 * time.Nanosecond, Max: 15 * rtlaUS, Histogram: []Bucket{
		{1 * rtlaUS, 8}, {2 * rtlaUS, 5}, {3 * rtlaUS, 1}, {4 * rtlaUS, 6}, {5 * rtlaUS, 2},
		{8 * rtlaUS, 1}, {14 * rtlaUS, 1}, {15 * rtlaUS, 1},
	}}
	if got := rtlaCPUResult(t, m, 0).Latency; !reflect.DeepEqual(got, want0) {
		t.Fatalf("CPU 0: got %+v, want %+v", got, want0)
	}
	if c1 := rtlaCPUResult(t, m, 1); c1.Latency.Avg != 3050*time.Nanosecond || c1.Osnoise.MaxSingle != 12*rtlaUS {
		t.Fatalf("CPU 1: got %+v", c1.Latency)
	}
}

func TestRtlaOsnoiseHistRejectsTruncatedCaptures(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		line    int
		msg     string
	}{
		// The lab kept the first 60 lines and noted the real length.
		{"lab612rt-smp2-rtla-osnoise-hist.txt", 61, "expected a bucket row or over:"},
		{"lab612rt-smp2-inject-rtla-osnoise-hist.txt", 61, "expected a bucket row or over:"},
		// The mail elided the rows, the Index header among them.
		{"lkml-2023-01_ziegler_osnoise-hist_int-avg-bug.txt", 6, "histogram data before the Index header"},
	} {
		m, err := ParseRtlaOsnoise(fixture(t, tc.fixture))
		if m != nil {
			t.Fatalf("%s: got a result", tc.fixture)
		}
		wantParseError(t, err, tc.line, tc.msg)
	}
}

// rtlaOsnoiseHist is a histogram in the layout of rtla ≥ 6.3 (float avg),
// taken from lkml-2025-03_glozar_osnoise-hist_float-avg_stop.txt with the
// header of the 6.1 fixtures, for hand-made variants.
const rtlaOsnoiseHist = `# RTLA osnoise histogram
# Time unit is microseconds (us)
# Duration:   0 00:00:05
Index   CPU-000   CPU-001
1             8         5 
2             5         9 
over:         0         7 
count:       13        21 
min:          1         1 
avg:       1.38      3.05 
max:          2        12 
`

func TestRtlaOsnoiseHistWarnsWhenCountsDisagree(t *testing.T) {
	out := strings.Replace(rtlaOsnoiseHist, "count:       13", "count:       14", 1)
	m := rtlaMustParse(t, ParseRtlaOsnoise, []byte(out))
	if len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], "CPU 0: the noise histogram holds 13 samples, its count 14") {
		t.Fatalf("warnings %q", m.Warnings)
	}
	if c := rtlaCPUResult(t, m, 1); c.Latency.Overflow != 7 || c.Latency.Samples != 21 {
		t.Fatalf("CPU 1: %+v", c.Latency)
	}
}

func TestRtlaOsnoiseHistRejectsMalformedHistograms(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  string
		line int
		msg  string
	}{
		{"no max", strings.TrimSuffix(rtlaOsnoiseHist, "max:          2        12 \n"), 10, "ends before its max: row"},
		{"no summary", strings.Split(rtlaOsnoiseHist, "count:")[0], 7, "ends before its count: row"},
		{"no over", strings.Split(rtlaOsnoiseHist, "over:")[0], 6, "ends before its over: row"},
		{"summary out of order", strings.Replace(rtlaOsnoiseHist, "min:", "avg:", 1), 9, "expected the min: row"},
		{"column twice", strings.Replace(rtlaOsnoiseHist, "CPU-001", "CPU-000", 1), 4, "CPU 0 has two noise columns"},
		{"bucket order", strings.Replace(rtlaOsnoiseHist, "2             5", "1             5", 1), 6, "bucket 1 does not follow bucket 1"},
		{"truncated bucket row", strings.Replace(rtlaOsnoiseHist, "2             5         9 ", "2             5", 1), 6, "truncated row: 1 of 2 columns"},
		{"count overflows", strings.Replace(rtlaOsnoiseHist, "count:       13", "count: 99999999999999999999", 1), 8, `CPU-000 "99999999999999999999"`},
		{"max overflows", strings.Replace(rtlaOsnoiseHist, "max:          2", "max: 99999999999999999", 1), 11, `CPU-000 "99999999999999999"`},
		{"dash with samples", strings.Replace(rtlaOsnoiseHist, "min:          1", "min:          -", 1), 9, "no value for 13 samples"},
		{"min above max", strings.Replace(rtlaOsnoiseHist, "min:          1", "min:          3", 1), 9, "min 3µs is above max 2µs"},
		{"unknown unit", strings.Replace(rtlaOsnoiseHist, "microseconds (us)", "seconds (s)", 1), 2, "unknown time unit"},
		{"timerlat column", strings.Replace(rtlaOsnoiseHist, "CPU-001", "Thr-001", 1), 4, `"Thr-001" is not a column`},
		{"an ALL block", rtlaOsnoiseHist + "ALL:        CPU\n", 12, "unexpected line after the histogram"},
		{"no samples at all", "# RTLA osnoise histogram\nIndex\nover: 0\ncount: 0\nmin: 0\navg: 0\nmax: 0\n", 2, "names no column"},
		{"only zero counts", "Index   CPU-003\nover:         0\ncount:        0\nmin:          -\navg:          -\nmax:          -\n",
			1, "no column of the histogram holds a sample"},
		{"no Index header", "# RTLA osnoise histogram\n# Time unit is microseconds (us)\n", 2, "ends before the histogram's Index header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseRtlaOsnoise([]byte(tc.out))
			if m != nil {
				t.Fatalf("got a result %+v", m)
			}
			wantParseError(t, err, tc.line, tc.msg)
		})
	}
}
