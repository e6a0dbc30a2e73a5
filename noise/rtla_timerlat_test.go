package noise

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRtlaTimerlatTopReadsThe61LabRunAndItsPlantedRegression(t *testing.T) {
	good := rtlaMustParse(t, ParseRtlaTimerlat, fixture(t, "lab612rt-smp2-rtla-timerlat-top.txt"))
	want := &Measurement{Tool: ToolRtlaTimerlat, Duration: 5 * time.Second, CPUs: []CPU{{
		CPU:        1,
		IRQLatency: &Latency{Samples: 4989, Min: 52 * rtlaUS, Avg: 116 * rtlaUS, Max: 3659 * rtlaUS},
		Latency:    &Latency{Samples: 4989, Min: 74 * rtlaUS, Avg: 177 * rtlaUS, Max: 3818 * rtlaUS},
	}}}
	if !reflect.DeepEqual(good, want) {
		t.Fatalf("got %+v, want %+v", good.CPUs[0], want.CPUs[0])
	}
	bad := rtlaMustParse(t, ParseRtlaTimerlat, fixture(t, "lab612rt-smp2-inject-rtla-timerlat-top.txt"))
	b := rtlaCPUResult(t, bad, 1)
	if b.Latency.Max != 5864*rtlaUS || b.IRQLatency.Max != 3772*rtlaUS || b.Latency.Samples != 4965 {
		t.Fatalf("injected run read as %+v %+v", b.IRQLatency, b.Latency)
	}
	if b.Latency.Max <= good.CPUs[0].Latency.Max {
		t.Fatalf("the injected thread max %v is not above the clean %v", b.Latency.Max, good.CPUs[0].Latency.Max)
	}
}

func TestRtlaTimerlatTopIgnoresTheAutoAnalysisAfterAStop(t *testing.T) {
	m := rtlaMustParse(t, ParseRtlaTimerlat, fixture(t, "rtla-doc_timerlat-top_aa.txt"))
	if len(m.CPUs) != 23 || m.CPUs[0].CPU != 1 || !m.StopHit || m.Duration != 12*time.Second {
		t.Fatalf("got %d CPUs from %d, stop %v, duration %v", len(m.CPUs), m.CPUs[0].CPU, m.StopHit, m.Duration)
	}
	c := rtlaCPUResult(t, m, 23)
	if !reflect.DeepEqual(c.Latency, &Latency{Samples: 12320, Min: 3 * rtlaUS, Avg: 11 * rtlaUS, Max: 41 * rtlaUS}) ||
		!reflect.DeepEqual(c.IRQLatency, &Latency{Samples: 12320, Min: 0, Avg: rtlaUS, Max: 28 * rtlaUS}) {
		t.Fatalf("CPU 23: %+v %+v", c.IRQLatency, c.Latency)
	}
}

func TestRtlaTimerlatTopRejectsTheAnnotatedDocRowButReadsItsTable(t *testing.T) {
	out := fixture(t, "rtla-doc-6.1era_timerlat-top_stop.txt")
	_, err := ParseRtlaTimerlat(out)
	wantParseError(t, err, 11, "the thread block has 8 values, want cur min avg max")

	// The doc marked the spike by hand; rtla never prints that.
	m := rtlaMustParse(t, ParseRtlaTimerlat, []byte(strings.Replace(string(out), " <--- CPU with spike", "", 1)))
	if len(m.CPUs) != 24 || !m.StopHit || m.Duration != 59*time.Second {
		t.Fatalf("got %d CPUs, stop %v, duration %v", len(m.CPUs), m.StopHit, m.Duration)
	}
	if c := rtlaCPUResult(t, m, 6); c.Latency.Max != 30*rtlaUS || c.IRQLatency.Max != 12*rtlaUS || c.Latency.Samples != 58634 {
		t.Fatalf("CPU 6: %+v %+v", c.IRQLatency, c.Latency)
	}
}

func TestRtlaTimerlatTopReadsEscapesThatAMailLost(t *testing.T) {
	out := fixture(t, "lkml-2024-04-24_bristot_timerlat-top_ansi_not_tty.txt")
	_, err := ParseRtlaTimerlat(out)
	wantParseError(t, err, 1, "no rtla timerlat table")

	// The README says rtla printed an ESC before each '['.
	m := rtlaMustParse(t, ParseRtlaTimerlat, []byte(strings.ReplaceAll(string(out), "[", "\x1b[")))
	if !reflect.DeepEqual(rtlaCPUNumbers(m), []int{0, 1}) || m.Duration != time.Second {
		t.Fatalf("CPUs %v, duration %v", rtlaCPUNumbers(m), m.Duration)
	}
	if c := rtlaCPUResult(t, m, 0); c.IRQLatency.Max != 54*rtlaUS || c.Latency.Max != 57*rtlaUS || c.Latency.Samples != 1013 {
		t.Fatalf("CPU 0: %+v %+v", c.IRQLatency, c.Latency)
	}
}

// rtlaTimerlatTopUser is rtla ≥ 6.10 timerlat top with user threads, not
// on a tty. No fixture has it: it is printed here with the format strings
// of timerlat_top.c that noise-formats.md §2.4 quotes (title padded for
// -u, "Ret user" block, the rule and "ALL #count eE" row).
const rtlaTimerlatTopUser = `                                     Timer Latency                                                                                       
  0 00:00:10   |          IRQ Timer Latency (us)        |         Thread Timer Latency (us)      |    Ret user Timer Latency (us)
CPU COUNT      |      cur       min       avg       max |      cur       min       avg       max |      cur       min       avg       max
  0 #10001     |        1         0         1        12 |        4         2         4        20 |        5         3         5        25
  1 #10000     |        2         0         1        15 |        5         2         5        22 |        6         3         6        30
---------------|----------------------------------------|----------------------------------------|---------------------------------------
ALL #20001  e0 |                  0         1        15 |                  2         4        22 |                  3         5        30
`

func TestRtlaTimerlatTopReadsUserThreadsAndTheALLRow(t *testing.T) {
	m := rtlaMustParse(t, ParseRtlaTimerlat, []byte(rtlaTimerlatTopUser))
	want := CPU{
		CPU:         1,
		IRQLatency:  &Latency{Samples: 10000, Min: 0, Avg: rtlaUS, Max: 15 * rtlaUS},
		Latency:     &Latency{Samples: 10000, Min: 2 * rtlaUS, Avg: 5 * rtlaUS, Max: 22 * rtlaUS},
		UserLatency: &Latency{Samples: 10000, Min: 3 * rtlaUS, Avg: 6 * rtlaUS, Max: 30 * rtlaUS},
	}
	if got := rtlaCPUResult(t, m, 1); !reflect.DeepEqual(got, want) || len(m.CPUs) != 2 || m.Duration != 10*time.Second {
		t.Fatalf("got %+v (%d CPUs, %v), want %+v", got, len(m.CPUs), m.Duration, want)
	}
}

func TestRtlaTimerlatTopReadsNanosecondsAndALLCountsWithAnExponent(t *testing.T) {
	// -n, kernel threads; printed like rtlaTimerlatTopUser. The COUNTs sum
	// to 2234567, which rtla prints as 223456 e1.
	out := `                                     Timer Latency                                              
  0 00:20:34   |          IRQ Timer Latency (ns)        |         Thread Timer Latency (ns)
CPU COUNT      |      cur       min       avg       max |      cur       min       avg       max
  2 #1234567   |     1500       800      1200      9000 |     3000      2000      2500     15000
  3 #1000000   |     1400       700      1100      8000 |     2900      1900      2400     14000
---------------|----------------------------------------|---------------------------------------
ALL #223456 e1 |                700      1150      9000 |               1900      2450     15000
`
	m := rtlaMustParse(t, ParseRtlaTimerlat, []byte(out))
	c := rtlaCPUResult(t, m, 2)
	if !reflect.DeepEqual(c.IRQLatency, &Latency{Samples: 1234567, Min: 800, Avg: 1200, Max: 9000}) || c.Latency.Max != 15*rtlaUS ||
		m.Duration != 20*time.Minute+34*time.Second {
		t.Fatalf("CPU 2: %+v %+v, duration %v", c.IRQLatency, c.Latency, m.Duration)
	}
	_, err := ParseRtlaTimerlat([]byte(strings.Replace(out, "#223456 e1", "#223455 e1", 1)))
	wantParseError(t, err, 7, "ALL #223455 e1 disagrees with the rows, whose COUNTs sum to 2234567")
}

func TestRtlaTimerlatTopLeavesOutAnEmptyUserBlockWithAWarning(t *testing.T) {
	out := strings.Replace(rtlaTimerlatTopUser,
		"|        6         3         6        30\n", "|        -         -         -         -\n", 1)
	out = strings.Replace(out, "                  3         5        30\n", "                  3         5        25\n", 1)
	m := rtlaMustParse(t, ParseRtlaTimerlat, []byte(out))
	if c := rtlaCPUResult(t, m, 1); c.UserLatency != nil || c.Latency == nil || c.IRQLatency == nil {
		t.Fatalf("CPU 1: %+v", c)
	}
	if !reflect.DeepEqual(m.Warnings, []string{"CPU 1: rtla reported no user-thread samples"}) {
		t.Fatalf("warnings %q", m.Warnings)
	}
}

func TestRtlaTimerlatTopRejectsMalformedTables(t *testing.T) {
	row1 := "  1 #10000     |        2         0         1        15 |        5         2         5        22 |        6         3         6        30\n"
	for _, tc := range []struct {
		name, old, new string
		line           int
		msg            string
	}{
		{"ALL max disagrees", "                  3         5        30\n", "                  3         5        31\n", 7,
			"the ALL user-thread block disagrees with the rows (min 3µs, max 30µs)"},
		{"a row lost", row1, "", 6, "ALL #20001 e0 disagrees with the rows, whose COUNTs sum to 10001"},
		{"CPU twice", row1, strings.Replace(row1, "  1 #", "  0 #", 1), 5, "CPU 0 appears twice (first on line 4)"},
		{"truncated row", row1, "  1 #10000     |        2         0         1        15 |        5\n", 5, "truncated row: 2 of 3 blocks"},
		{"short block", row1, strings.Replace(row1, "        5         2  ", "        2  ", 1), 5, "the thread block has 3 values"},
		{"count overflows", "#10000    ", "#99999999999999999999", 5, `COUNT "#99999999999999999999"`},
		{"max overflows", "       30\n", " 99999999999999999999\n", 5, `user-thread max "99999999999999999999"`},
		{"min above max", "|        2         0         1        15 |", "|        2        16         1        15 |", 5,
			"the IRQ min 16µs is above its max 15µs"},
		{"values without a count", "  1 #10000     |        2         0         1        15 |",
			"  1 #0         |        -         -         -         - |", 5, "thread latencies but COUNT is 0"},
		{"empty IRQ block with a count", "|        2         0         1        15 |", "|        -         -         -         - |", 5,
			"COUNT is 10000 but the IRQ block is empty"},
		{"header out of step", "      max |      cur       min       avg       max\n", "      max\n", 3,
			"the column header does not match the 3 block titles"},
		{"unknown block", "Ret user Timer", "Ret kernel Timer", 2, `unknown latency block "Ret kernel Timer Latency (us)"`},
		{"mixed units", "Thread Timer Latency (us)", "Thread Timer Latency (ns)", 2, "the blocks mix time units"},
		{"row after ALL", "e0 |                  0         1        15 |                  2         4        22 |                  3         5        30\n",
			"e0 |                  0         1        15 |                  2         4        22 |                  3         5        30\n" + row1,
			8, "a row after the ALL row"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(rtlaTimerlatTopUser, tc.old) {
				t.Fatalf("%q is not in the sample", tc.old)
			}
			m, err := ParseRtlaTimerlat([]byte(strings.Replace(rtlaTimerlatTopUser, tc.old, tc.new, 1)))
			if m != nil {
				t.Fatalf("got a result %+v", m)
			}
			wantParseError(t, err, tc.line, tc.msg)
		})
	}
}

func TestRtlaTimerlatTopRejectsAHeaderWithoutRows(t *testing.T) {
	out := strings.Join(strings.SplitAfter(rtlaTimerlatTopUser, "\n")[:3], "")
	_, err := ParseRtlaTimerlat([]byte(out))
	wantParseError(t, err, 3, "the table has no CPU rows")
}

func TestRtlaTimerlatHistReadsTheALLSummaryLayout(t *testing.T) {
	m := rtlaMustParse(t, ParseRtlaTimerlat, fixture(t, "lkml-2024-04-24_bristot_timerlat-hist_ALL_summary.txt"))
	if !reflect.DeepEqual(rtlaCPUNumbers(m), []int{0, 1}) || m.Duration != 10*time.Second || len(m.Warnings) != 0 || m.StopHit {
		t.Fatalf("CPUs %v, duration %v, warnings %q", rtlaCPUNumbers(m), m.Duration, m.Warnings)
	}
	c := rtlaCPUResult(t, m, 0)
	irq := &Latency{Samples: 10001, Min: 6 * rtlaUS, Avg: 185 * rtlaUS, Max: 428 * rtlaUS, Overflow: 9973, Histogram: []Bucket{
		{6 * rtlaUS, 1}, {7 * rtlaUS, 1}, {8 * rtlaUS, 1}, {9 * rtlaUS, 7}, {10 * rtlaUS, 16}, {11 * rtlaUS, 1}, {19 * rtlaUS, 1},
	}}
	thr := &Latency{Samples: 10001, Min: 18 * rtlaUS, Avg: 204 * rtlaUS, Max: 450 * rtlaUS, Overflow: 9998, Histogram: []Bucket{
		{18 * rtlaUS, 2}, {19 * rtlaUS, 1},
	}}
	if !reflect.DeepEqual(c.IRQLatency, irq) || !reflect.DeepEqual(c.Latency, thr) || c.UserLatency != nil || c.Osnoise != nil {
		t.Fatalf("CPU 0: got %+v %+v", c.IRQLatency, c.Latency)
	}
	if c1 := rtlaCPUResult(t, m, 1); c1.Latency.Overflow != 10000 || len(c1.IRQLatency.Histogram) != 7 {
		t.Fatalf("CPU 1: got %+v %+v", c1.IRQLatency, c1.Latency)
	}
}

func TestRtlaTimerlatHistReadsUserColumnsAndDashes(t *testing.T) {
	m := rtlaMustParse(t, ParseRtlaTimerlat, fixture(t, "lkml-2025_glozar_timerlat-hist_user_ALL_bpf-action.txt"))
	want := &Measurement{
		Tool:     ToolRtlaTimerlat,
		Duration: time.Second,
		CPUs: []CPU{{
			CPU:        0,
			IRQLatency: &Latency{Samples: 1, Min: 6 * rtlaUS, Avg: 6 * rtlaUS, Max: 6 * rtlaUS, Histogram: []Bucket{{6 * rtlaUS, 1}}},
			Latency:    &Latency{Samples: 1, Min: 21 * rtlaUS, Avg: 21 * rtlaUS, Max: 21 * rtlaUS, Histogram: []Bucket{{21 * rtlaUS, 1}}},
		}},
		Warnings: []string{"CPU 0: rtla reported no user-thread samples (column Usr-000)"},
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got %+v, want %+v", m, want)
	}
}

func TestRtlaTimerlatHistRejectsTheEmptyHistogramOfAnAbortedRun(t *testing.T) {
	_, err := ParseRtlaTimerlat(fixture(t, "lkml-2025-01_glozar_timerlat-hist_empty_after_aborted_u_run.txt"))
	wantParseError(t, err, 4, "the Index header names no column: no CPU recorded a sample")
}

// rtlaTimerlatHistBody and rtlaTimerlatHistAll are the 2024 ALL-summary
// fixture cut to one CPU.
const (
	rtlaTimerlatHistBody = `# RTLA timerlat histogram
# Time unit is microseconds (us)
# Duration:   0 00:00:10
Index   IRQ-001   Thr-001
8             1         0 
19           80         1 
over:      9920     10000 
count:    10001     10001 
min:          8        19 
avg:         95       113 
max:        341       371 
`
	rtlaTimerlatHistAll = `ALL:        IRQ       Thr
count:    10001     10001 
min:          8        19 
avg:         95       113 
max:        341       371 
`
)

func TestRtlaTimerlatHistReadsNanoseconds(t *testing.T) {
	// timerlat hist -n, as timerlat_hist.c prints its header.
	out := strings.Replace(rtlaTimerlatHistBody+rtlaTimerlatHistAll, "microseconds (us)", "nanoseconds (ns)", 1)
	m := rtlaMustParse(t, ParseRtlaTimerlat, []byte(out))
	c := rtlaCPUResult(t, m, 1)
	if c.IRQLatency.Max != 341 || c.IRQLatency.Histogram[1] != (Bucket{19, 80}) || c.Latency.Min != 19 {
		t.Fatalf("CPU 1: %+v %+v", c.IRQLatency, c.Latency)
	}
}

func TestRtlaTimerlatHistRejectsMalformedHistograms(t *testing.T) {
	body, all := rtlaTimerlatHistBody, rtlaTimerlatHistAll
	for _, tc := range []struct {
		name string
		out  string
		line int
		msg  string
	}{
		{"ALL count disagrees", body + strings.Replace(all, "10001     10001", "10002     10001", 1),
			13, "the ALL: IRQ count 10002 disagrees with its columns, which sum to 10001"},
		{"ALL max disagrees", body + strings.Replace(all, "341       371", "341       372", 1),
			16, "the ALL: thread max 372µs disagrees with its columns' 371µs"},
		{"ALL cut short", body + strings.Join(strings.SplitAfter(all, "\n")[:2], ""), 13, "the ALL: summary ends before its min: row"},
		{"ALL names a stranger", body + strings.Replace(all, "Thr", "CPU", 1), 12, `"CPU" is not a column of rtla's ALL: summary`},
		{"ALL row too short", body + "ALL:        IRQ       Thr\ncount:    10001\n", 13, "the ALL: row has 1 values, its header 2"},
		{"ALL twice", body + all + all, 17, "unexpected line after the histogram"},
		{"user column twice", strings.Replace(body, "IRQ-001   Thr-001", "Usr-001   Usr-001", 1), 4,
			"CPU 1 has two user-thread columns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseRtlaTimerlat([]byte(tc.out))
			if m != nil {
				t.Fatalf("got a result %+v", m)
			}
			wantParseError(t, err, tc.line, tc.msg)
		})
	}
}
