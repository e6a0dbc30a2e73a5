package noise

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// lat is a latencyWant in µs without histogram: what T: lines give.
func lat(cpu int, samples Count, lo, avg, hi time.Duration) latencyWant {
	return latencyWant{cpu: cpu, samples: samples, min: lo * us, avg: avg * us, max: hi * us}
}

func TestParseCyclictestReadsEveryFixture(t *testing.T) {
	for _, tc := range []struct {
		file      string
		ns        bool
		want      []latencyWant
		overflow  []Count
		byThread  bool   // CPU numbers are thread indices
		version   string // only the JSON says
		nWarnings int
	}{
		// -H 30 with two threads: rows and trailers carry an all-threads
		// column; thread 1's max, 1588 µs, lies beyond the 30 buckets.
		{file: "cyclictest24_H30_t2.txt", want: []latencyWant{
			{0, 1998, 9 * us, 25 * us, 301 * us, 30, Bucket{0, 0}, Bucket{29 * us, 80}},
			{1, 1999, 9 * us, 30 * us, 1588 * us, 30, Bucket{0, 0}, Bucket{29 * us, 92}},
		}, overflow: []Count{601, 821}, byThread: true, nWarnings: 1},
		{file: "cyclictest24_h40_q.txt", want: []latencyWant{
			{0, 3000, 9 * us, 29 * us, 982 * us, 40, Bucket{0, 0}, Bucket{39 * us, 17}},
		}, overflow: []Count{163}, byThread: true, nWarnings: 1},
		// The JSON of that run: empty buckets left out, no overflow count,
		// the CPU named.
		{file: "cyclictest24_h40_q.json", version: "2.40", want: []latencyWant{
			{1, 3000, 9 * us, 29080 * time.Nanosecond, 982 * us, 31, Bucket{9 * us, 1}, Bucket{39 * us, 17}},
		}, overflow: []Count{0}},
		{file: "cyclictest24_noh.json", version: "2.40", want: []latencyWant{
			{1, 1000, 13 * us, 27760 * time.Nanosecond, 196 * us, 0, Bucket{}, Bucket{}},
		}, overflow: []Count{0}},
		{file: "cyclictest24_q.txt", want: []latencyWant{lat(0, 2000, 10, 28, 338)}, byThread: true, nWarnings: 1},
		{file: "cyclictest24_N_q.txt", ns: true, want: []latencyWant{
			{0, 998, 14236 * time.Nanosecond, 41546 * time.Nanosecond, 1561868 * time.Nanosecond, 0, Bucket{}, Bucket{}},
		}, byThread: true, nWarnings: 1},
		{file: "cyclictest24_S_q.txt", want: []latencyWant{lat(0, 3997, 12, 26, 1943), lat(1, 1999, 10, 28, 199)}, byThread: true, nWarnings: 1},
		// 99 refreshes of the live display; the last one counts.
		{file: "cyclictest24_live.txt", want: []latencyWant{lat(0, 994, 13, 30, 103), lat(1, 662, 15, 29, 173)}, byThread: true, nWarnings: 1},
		{file: "lab612rt-smp2-cyclictest.txt", want: []latencyWant{lat(0, 4567, 27, 211, 5380)}, byThread: true, nWarnings: 1},
		{file: "lab612rt-smp2-inject-cyclictest.txt", want: []latencyWant{lat(0, 2960, 46, 836, 12271)}, byThread: true, nWarnings: 1},
		{file: "github_RomanSereda-orangepi-build-realtime_cyclictest_smp.txt", want: []latencyWant{
			lat(0, 1546988, 6, 16, 306), lat(1, 1546942, 6, 16, 342), lat(2, 1546914, 6, 16, 399), lat(3, 1546880, 5, 16, 333),
		}, byThread: true, nWarnings: 1},
		// A SIGUSR2 snapshot between "#----" lines, SCHED_OTHER (P: 0).
		{file: "rt-tests_commit_65a3bcd_cyclictest_shm_snapshot.txt", want: []latencyWant{
			lat(0, 124852, 20, 104, 354), lat(1, 83235, 6, 82, 330), lat(2, 62426, 9, 110, 358), lat(3, 49940, 9, 111, 453),
			lat(4, 41617, 14, 69, 815), lat(5, 35672, 15, 105, 360), lat(6, 31212, 15, 103, 372), lat(7, 27744, 20, 93, 681),
		}, byThread: true, nWarnings: 1},
		// --smi: each thread saw 2 SMIs, which a warning each reports.
		{file: "rt-tests_commit_fc7e151_cyclictest_smi.txt", want: []latencyWant{
			lat(0, 9975, 2, 4, 20831), lat(1, 6650, 2, 5, 19910), lat(2, 4987, 2, 6, 20811), lat(3, 3990, 2, 7, 20322),
		}, byThread: true, nWarnings: 5},
	} {
		t.Run(tc.file, func(t *testing.T) {
			parse := ParseCyclictest
			if tc.ns {
				parse = ParseCyclictestNS
			}
			m, err := parse(fixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, m)
			checkLatency(t, m, tc.want)
			for i, o := range tc.overflow {
				if got := m.CPUs[i].Latency.Overflow; got != o {
					t.Errorf("CPU %d: overflow %d, want %d", m.CPUs[i].CPU, got, o)
				}
			}
			byThread := len(m.Warnings) > 0 && m.Warnings[0] == threadIndexWarning
			if m.Tool != ToolCyclictest || m.Version != tc.version || byThread != tc.byThread || len(m.Warnings) != tc.nWarnings || m.StopHit {
				t.Errorf("got tool %q version %q stop %v warnings %q", m.Tool, m.Version, m.StopHit, m.Warnings)
			}
		})
	}
}

func TestParseCyclictestWarnsAboutSMIs(t *testing.T) {
	m, err := ParseCyclictest(fixture(t, "rt-tests_commit_fc7e151_cyclictest_smi.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if w := m.Warnings[4]; w != "thread 3 saw 2 SMIs: firmware noise no kernel causes" {
		t.Errorf("got %q", w)
	}
}

func TestParseCyclictestTakesTheLastCompleteRefreshWhenTheLiveOutputIsCut(t *testing.T) {
	live := string(fixture(t, "cyclictest24_live.txt"))
	for name, out := range map[string]string{
		"cut inside the last line": live[:len(live)-40],
		"cut after a whole line":   live[:strings.LastIndex(live[:len(live)-1], "\n")+1],
	} {
		t.Run(name, func(t *testing.T) {
			m, err := ParseCyclictest([]byte(out))
			if err != nil {
				t.Fatal(err)
			}
			checkLatency(t, m, []latencyWant{lat(0, 983, 13, 30, 103), lat(1, 656, 15, 29, 173)})
			want := "the last T: lines (from line 396) are cut off; using the complete refresh at line 392"
			if len(m.Warnings) != 2 || m.Warnings[0] != want {
				t.Errorf("warnings %q", m.Warnings)
			}
		})
	}
}

func TestParseCyclictestLeavesOutThreadsWithoutSamples(t *testing.T) {
	out := "T: 0 ( 7151) P:95 I:1000 C:      0 Min:1000000 Act:    0 Avg:    0 Max:       0\n" +
		"T: 1 ( 7152) P:95 I:1500 C:     10 Min:     21 Act:   24 Avg:   27 Max:      37\n"
	m, err := ParseCyclictest([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	checkLatency(t, m, []latencyWant{lat(1, 10, 21, 27, 37)})
	if len(m.Warnings) != 2 || m.Warnings[1] != "thread 0 recorded no samples (C: 0)" {
		t.Errorf("warnings %q", m.Warnings)
	}
}

func TestParseCyclictestBreakTraceSetsStopHit(t *testing.T) {
	out := string(fixture(t, "cyclictest24_q.txt")) + "# Thread Ids: 06577\n# Break thread: 6577\n# Break value: 338\n"
	m, err := ParseCyclictest([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if !m.StopHit || !strings.Contains(m.Warnings[len(m.Warnings)-1], "thread 6577 went over its -b break threshold (break value 338)") {
		t.Errorf("stop %v warnings %q", m.StopHit, m.Warnings)
	}
}

func TestParseCyclictestReadsNewerAndOlderHistogramLayouts(t *testing.T) {
	// rt-tests 2.7+ -H 40 with one thread: no # Total:, empty rows left
	// out, a sum column even for one thread, "# Thread 0: " with a
	// trailing space. "Latencys" is the spelling before 2011.
	out := "# /dev/cpu_dma_latency set to 0us\n" +
		"# Histogram\n" +
		"000009 000004\t000004\n" +
		"000012 000006\t000006\n" +
		"# Min Latencys: 00009\n" +
		"# Avg Latencys: 00011\n" +
		"# Max Latencys: 00250\n" +
		"# Histogram Overflows: 00002\n" +
		"# Histogram Overflow at cycle number:\n" +
		"# Thread 0: 00003 00007 \n" +
		"\n"
	m, err := ParseCyclictest([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, m)
	checkLatency(t, m, []latencyWant{{0, 12, 9 * us, 11 * us, 250 * us, 2, Bucket{9 * us, 4}, Bucket{12 * us, 6}}})
	if m.CPUs[0].Latency.Overflow != 2 {
		t.Errorf("overflow %d", m.CPUs[0].Latency.Overflow)
	}
	// -N: the same block read in ns.
	m, err = ParseCyclictestNS([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if l := m.CPUs[0].Latency; l.Max != 250*time.Nanosecond || l.Histogram[0].Upper != 9*time.Nanosecond {
		t.Errorf("-N: %+v", l)
	}
}

func TestParseCyclictestRefusesBrokenOutput(t *testing.T) {
	h40 := string(fixture(t, "cyclictest24_h40_q.txt"))
	s := string(fixture(t, "cyclictest24_S_q.txt"))
	q := string(fixture(t, "cyclictest24_q.txt"))
	const H30, H40 = "cyclictest24_H30_t2.txt", "cyclictest24_h40_q.txt"
	for _, tc := range []struct {
		name string
		out  []byte
		ns   bool
		line int
		msg  string
	}{
		{name: "empty output", out: []byte(""), msg: "empty output"},
		{name: "usage text", out: fixture(t, "cyclictest24_help.txt"), line: 2, msg: "usage text"},
		{name: "a trailer without its block", out: fixture(t, "rt-tests_commit_992b905_cyclictest_overflow_tracking.txt"), line: 2, msg: "without the # Histogram line"},
		{name: "oslat output", out: fixture(t, "oslat24_c1.txt"), msg: "no cyclictest results"},
		{name: "-N output read as µs", out: fixture(t, "cyclictest24_N_q.txt"), line: 2, msg: "parse it with ParseCyclictestNS"},
		{name: "µs output read as -N", out: []byte(q), ns: true, line: 2, msg: "parse it with ParseCyclictest"},
		{name: "T: lines out of order", out: []byte(strings.Replace(s, "T: 0", "T: 2", 1)), line: 2, msg: "T: line of thread 2 where thread 0 belongs"},
		{name: "malformed T: line", out: []byte(strings.Replace(s, "Min:     12", "Min: x", 1)), line: 2, msg: "malformed T: line"},
		{name: "single block cut", out: []byte(s[:len(s)-20]), line: 3, msg: "holds no complete set of threads"},
		{name: "only T: line cut", out: []byte(q[:len(q)-20]), line: 2, msg: "ends inside the only T: line"},
		{name: "no thread has samples", out: []byte("T: 0 ( 7151) P:95 I:1000 C:      0 Min:1000000 Act:    0 Avg:    0 Max:       0\n"), line: 1, msg: "no thread recorded samples"},
		{name: "avg above max", out: []byte(strings.Replace(q, "Max:     338", "Max:      20", 1)), line: 2, msg: "min 10µs, avg 28µs and max 20µs are out of order"},
		{name: "count beyond int64", out: []byte(strings.Replace(q, "C:   2000", "C:99999999999999999999", 1)), line: 2, msg: "not a number kbisect can hold"},
		{name: "histogram cut in the rows", out: []byte(h40[:strings.Index(h40, "000020")]), line: 22, msg: "ends without its # Min Latencies: line"},
		{name: "histogram cut before its trailer", out: []byte(h40[:strings.Index(h40, "# Min")]), line: 43, msg: "ends without its # Min Latencies: line"},
		{name: "overflow line missing", out: edit(t, H40, "# Histogram Overflows: 00163\n", ""), line: 48, msg: "ends without its # Histogram Overflows: line"},
		{name: "row short of a column", out: edit(t, H30, "000015 000094\t000022\t000116", "000015 000094\t000022"), line: 18, msg: "2 counts where line 3 has 3"},
		{name: "wrong all-threads count", out: edit(t, H30, "000116", "000117"), line: 18, msg: "all-threads count 117 is not the sum 116"},
		{name: "max short of a column", out: edit(t, H30, "01588 01588", "01588"), line: 36, msg: "2 values for 2 threads (expected 3)"},
		{name: "avg short of a column", out: edit(t, H30, "# Avg Latencies: 00025 00030", "# Avg Latencies: 00025"), line: 35, msg: "1 values where # Min Latencies: has 2"},
		{name: "total disagrees", out: edit(t, H40, "000002837", "000002838"), line: 43, msg: "thread 0: # Total: 000002838, but its buckets hold 2837"},
		{name: "trailer twice", out: edit(t, H40, "# Max Latencies: 00982\n", "# Max Latencies: 00982\n# Max Latencies: 00982\n"), line: 47, msg: "a second Max Latencies line (the first is line 46)"},
		{name: "row after the trailer", out: edit(t, H40, "# Min", "000040 000001\n# Min"), line: 44, msg: "histogram row after the trailer"},
		{name: "rows out of order", out: edit(t, H40, "000011 000003", "000009 000003"), line: 14, msg: "bucket 000009 does not follow bucket 10µs"},
		{name: "max below a full bucket", out: edit(t, H40, "# Max Latencies: 00982", "# Max Latencies: 00030"), line: 46, msg: "max 30µs is below its non-empty bucket 39µs"},
		{name: "overflow beyond int64", out: edit(t, H40, "Overflows: 00163", "Overflows: 99999999999999999999"), line: 47, msg: "overflow count 99999999999999999999"},
		{name: "second histogram", out: []byte(h40 + h40), line: 52, msg: "a second histogram block (the first starts at line 2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parse := ParseCyclictest
			if tc.ns {
				parse = ParseCyclictestNS
			}
			m, err := parse(tc.out)
			if m != nil {
				t.Errorf("got a result with the error: %+v", m)
			}
			wantParseError(t, err, tc.line, tc.msg)
		})
	}
}

// cyclictestJSON is a two-thread cyclictest --json file; thread 0 (CPU 2)
// had 2 of its 5 samples beyond the histogram.
const cyclictestJSON = `{
  "file_version": 1,
  "cmdline:": "cyclictest -m -p 95 -h 40 -q -D 3 -a 1-2 -t 2 --json=x.json",
  "rt_test_version:": "2.70",
  "start_time": "Mon, 30 Nov 2026 01:16:35 +0000",
  "return_code": 0,
  "num_threads": 2,
  "resolution_in_ns": 0,
  "thread": {
    "0": {
      "histogram": {
        "9": 1,
        "10": 2
      },
      "cycles": 5,
      "min": 9,
      "max": 45,
      "avg": 20.40,
      "cpu": 2,
      "node": 0
    },
    "1": {
      "histogram": {
        "12": 3
      },
      "cycles": 3,
      "min": 12,
      "max": 12,
      "avg": 12.00,
      "cpu": 1,
      "node": 0
    }
  }
}
`

func TestParseCyclictestReadsJSONFiles(t *testing.T) {
	ns := time.Nanosecond
	for _, tc := range []struct {
		name     string
		edits    []string // old, new pairs
		want     []latencyWant
		warnings []string
	}{
		{name: "CPUs from their threads", want: []latencyWant{
			{1, 3, 12 * us, 12 * us, 12 * us, 1, Bucket{12 * us, 3}, Bucket{12 * us, 3}},
			{2, 5, 9 * us, 20400 * ns, 45 * us, 2, Bucket{9 * us, 1}, Bucket{10 * us, 2}},
		}},
		{name: "nanoseconds with resolution_in_ns", edits: []string{`"resolution_in_ns": 0`, `"resolution_in_ns": 1`}, want: []latencyWant{
			{1, 3, 12 * ns, 12 * ns, 12 * ns, 1, Bucket{12 * ns, 3}, Bucket{12 * ns, 3}},
			{2, 5, 9 * ns, 20 * ns, 45 * ns, 2, Bucket{9 * ns, 1}, Bucket{10 * ns, 2}},
		}},
		{name: "thread indices without affinity", edits: []string{`"cpu": 2`, `"cpu": -1`, `"cpu": 1`, `"cpu": -1`}, want: []latencyWant{
			{0, 5, 9 * us, 20400 * ns, 45 * us, 2, Bucket{9 * us, 1}, Bucket{10 * us, 2}},
			{1, 3, 12 * us, 12 * us, 12 * us, 1, Bucket{12 * us, 3}, Bucket{12 * us, 3}},
		}, warnings: []string{threadIndexWarning}},
		{name: "nan average of a thread that never ran", edits: []string{`"12": 3`, ``, `"cycles": 3`, `"cycles": 0`, `"avg": 12.00`, `"avg": -nan`}, want: []latencyWant{
			{2, 5, 9 * us, 20400 * ns, 45 * us, 2, Bucket{9 * us, 1}, Bucket{10 * us, 2}},
		}, warnings: []string{"thread 1 (CPU 1) recorded no samples"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseCyclictest([]byte(cyclictestJSONWith(tc.edits)))
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, m)
			checkLatency(t, m, tc.want)
			if m.Version != "2.70" || strings.Join(m.Warnings, "|") != strings.Join(tc.warnings, "|") {
				t.Errorf("version %q warnings %q", m.Version, m.Warnings)
			}
		})
	}
}

// cyclictestJSONWith is cyclictestJSON with edits, old and new pairs,
// made in turn.
func cyclictestJSONWith(edits []string) string {
	js := cyclictestJSON
	for i := 0; i < len(edits); i += 2 {
		js = strings.Replace(js, edits[i], edits[i+1], 1)
	}
	return js
}

func TestParseCyclictestRefusesBrokenJSON(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edits []string // old, new pairs
		line  int
		msg   string
	}{
		{"nan outside avg", []string{`"max": 45,`, `"max": nan,`}, 17, "invalid JSON"},
		{"nan after cycles", []string{`"avg": 12.00`, `"avg": nan`}, 29, "avg is nan after 3 cycles"},
		{"every thread without samples", []string{`"cycles": 3`, `"cycles": 0`, `"cycles": 5`, `"cycles": 0`}, 9, "no thread recorded samples"},
		{"CPU twice", []string{`"cpu": 1`, `"cpu": 2`}, 30, "CPU 2 is measured by threads 0 and 1: kbisect needs one thread per CPU"},
		{"unknown resolution", []string{`"resolution_in_ns": 0`, `"resolution_in_ns": 2`}, 8, "resolution_in_ns is 2"},
		{"missing cycles", []string{`"cycles": 3,`, ``}, 22, `thread 1: no "cycles" value`},
		{"avg below min", []string{`"avg": 20.40`, `"avg": 8.40`}, 17, "thread 0: min 9µs, avg 8.4µs and max 45µs are out of order"},
		{"thread key not an index", []string{`"1": {`, `"one": {`}, 22, `thread key "one" is not a thread index`},
		{"histogram key not a latency", []string{`"12": 3`, `"x": 3`}, 24, `bucket "x" is not a latency`},
		{"null cpu", []string{`"cpu": 1`, `"cpu": null`}, 30, "thread 1: cpu is null"},
		{"unpinned thread other than -1", []string{`"cpu": 1`, `"cpu": -2`}, 30, "thread 1: cpu -2 is not a CPU number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseCyclictest([]byte(cyclictestJSONWith(tc.edits)))
			if m != nil {
				t.Errorf("got a result with the error: %+v", m)
			}
			wantParseError(t, err, tc.line, tc.msg)
		})
	}
}

func FuzzParseCyclictest(f *testing.F) {
	for _, name := range []string{
		"cyclictest24_H30_t2.txt", "cyclictest24_N_q.txt", "cyclictest24_S_q.txt", "cyclictest24_h40_q.json",
		"cyclictest24_h40_q.txt", "cyclictest24_help.txt", "cyclictest24_live.txt", "cyclictest24_noh.json",
		"cyclictest24_q.txt", "lab612rt-smp2-cyclictest.txt", "lab612rt-smp2-inject-cyclictest.txt",
		"github_RomanSereda-orangepi-build-realtime_cyclictest_smp.txt",
		"rt-tests_commit_65a3bcd_cyclictest_shm_snapshot.txt",
		"rt-tests_commit_992b905_cyclictest_overflow_tracking.txt",
		"rt-tests_commit_fc7e151_cyclictest_smi.txt",
	} {
		f.Add(fixture(f, name))
	}
	f.Add([]byte(cyclictestJSON))
	f.Fuzz(func(t *testing.T, out []byte) {
		for _, parse := range []func([]byte) (*Measurement, error){ParseCyclictest, ParseCyclictestNS} {
			m, err := parse(out)
			if err != nil {
				var pe *ParseError
				if !errors.As(err, &pe) || m != nil {
					t.Fatalf("got %+v with error %v", m, err)
				}
				continue
			}
			checkInvariants(t, m)
		}
	})
}
