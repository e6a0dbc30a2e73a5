package noise

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// checkInvariants holds for every successful parse: CPUs sorted and
// unique, each with Min <= Avg <= Max and buckets in increasing order.
func checkInvariants(t testing.TB, m *Measurement) {
	t.Helper()
	if m == nil || len(m.CPUs) == 0 {
		t.Fatalf("success without CPUs: %+v", m)
	}
	for i, c := range m.CPUs {
		if i > 0 && c.CPU <= m.CPUs[i-1].CPU {
			t.Fatalf("CPUs not sorted and unique: %d after %d", c.CPU, m.CPUs[i-1].CPU)
		}
		l := c.Latency
		if l == nil || l.Min > l.Avg || l.Avg > l.Max || l.Min < 0 || l.Samples <= 0 || l.Overflow < 0 {
			t.Fatalf("CPU %d: bad latency %+v", c.CPU, l)
		}
		for j := 1; j < len(l.Histogram); j++ {
			if l.Histogram[j].Upper <= l.Histogram[j-1].Upper {
				t.Fatalf("CPU %d: buckets out of order", c.CPU)
			}
		}
	}
}

type latencyWant struct {
	cpu           int
	samples       Count
	min, avg, max time.Duration
	buckets       int
	first, last   Bucket
}

func checkLatency(t *testing.T, m *Measurement, want []latencyWant) {
	t.Helper()
	if len(m.CPUs) != len(want) {
		t.Fatalf("%d CPUs, want %d", len(m.CPUs), len(want))
	}
	for i, w := range want {
		c := m.CPUs[i]
		l := c.Latency
		got := latencyWant{cpu: c.CPU, samples: l.Samples, min: l.Min, avg: l.Avg, max: l.Max, buckets: len(l.Histogram)}
		if len(l.Histogram) > 0 {
			got.first, got.last = l.Histogram[0], l.Histogram[len(l.Histogram)-1]
		}
		if got != w {
			t.Errorf("CPU %d:\n got %+v\nwant %+v", c.CPU, got, w)
		}
	}
}

const us = time.Microsecond

func TestParseOslatReadsEveryFixture(t *testing.T) {
	for _, tc := range []struct {
		file     string
		version  string
		duration time.Duration
		want     []latencyWant
	}{
		{"lab612rt-smp2-oslat.txt", "2.40", 4996 * time.Millisecond, []latencyWant{
			{1, 126795354, us, us, 507 * us, 32, Bucket{us, 126788611}, Bucket{32 * us, 322}},
		}},
		{"lab612rt-smp2-inject-oslat.txt", "2.40", 4998 * time.Millisecond, []latencyWant{
			{1, 130000483, us, 1001 * time.Nanosecond, 6178 * us, 32, Bucket{us, 129997149}, Bucket{32 * us, 219}},
		}},
		{"oslat24_c1.txt", "2.40", 2998 * time.Millisecond, []latencyWant{
			{1, 120079299, us, 1002 * time.Nanosecond, 54040 * us, 32, Bucket{us, 120076302}, Bucket{32 * us, 204}},
		}},
		// The JSON of the same run: its 6-decimal average rounds to the same ns.
		{"oslat24_c1.json", "2.40", 2998 * time.Millisecond, []latencyWant{
			{1, 120079299, us, 1002 * time.Nanosecond, 54040 * us, 32, Bucket{us, 120076302}, Bucket{32 * us, 204}},
		}},
		// Two CPUs in columns; the longest thread gives the duration.
		{"oslat24_c01_zq.txt", "2.40", 2049 * time.Millisecond, []latencyWant{
			{0, 22218704, us, 1068 * time.Nanosecond, 201839 * us, 32, Bucket{us, 22217720}, Bucket{32 * us, 351}},
			{1, 22706132, us, 1066 * time.Nanosecond, 311977 * us, 32, Bucket{us, 22705579}, Bucket{32 * us, 227}},
		}},
		// rt-tests 1.10: "CPU Freq" label, seven CPUs from Core:, not 0..6.
		{"github_redhat-nfvpe-container-perf-tools_oslat_1.10_CPUFreq.txt", "1.10", 10003 * time.Millisecond, []latencyWant{
			{5, 426839052, us, us, 14 * us, 32, Bucket{us, 426829052}, Bucket{32 * us, 0}},
			{6, 426250884, us, us, 17 * us, 32, Bucket{us, 426240622}, Bucket{32 * us, 0}},
			{7, 425959807, us, us, 9 * us, 32, Bucket{us, 425949824}, Bucket{32 * us, 0}},
			{8, 426264597, us, us, 17 * us, 32, Bucket{us, 426254352}, Bucket{32 * us, 0}},
			{9, 424991891, us, us, 12 * us, 32, Bucket{us, 424981992}, Bucket{32 * us, 0}},
			{10, 427610503, us, us, 17 * us, 32, Bucket{us, 427600232}, Bucket{32 * us, 0}},
			{11, 426974105, us, us, 8 * us, 32, Bucket{us, 426964209}, Bucket{32 * us, 0}},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m, err := ParseOslat(fixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, m)
			if m.Tool != ToolOslat || m.Version != tc.version || m.Duration != tc.duration || m.StopHit || len(m.Warnings) != 0 {
				t.Errorf("got tool %q version %q duration %v stop %v warnings %q", m.Tool, m.Version, m.Duration, m.StopHit, m.Warnings)
			}
			checkLatency(t, m, tc.want)
			for _, c := range m.CPUs {
				if c.Latency.Overflow != 0 {
					t.Errorf("CPU %d: Overflow %d, but oslat never says how many overflowed", c.CPU, c.Latency.Overflow)
				}
			}
		})
	}
}

func TestParseOslatTextAndJSONOfOneRunAgree(t *testing.T) {
	text, err := ParseOslat(fixture(t, "oslat24_c1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := ParseOslat(fixture(t, "oslat24_c1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(text, js) {
		t.Errorf("text %+v\njson %+v", text, js)
	}
}

func TestParseOslatTraceThresholdStopIsAnErrorWithStopHit(t *testing.T) {
	m, err := ParseOslat(fixture(t, "oslat24_T5.txt"))
	wantParseError(t, err, 1, "trace threshold (5 us) triggered on CPU 1 with 1438 us")
	wantParseError(t, err, 1, "prints no summary")
	if m == nil || !m.StopHit || len(m.CPUs) != 0 || m.Version != "2.40" {
		t.Errorf("got %+v, want StopHit with no CPUs", m)
	}
}

// summary rewrites the oslat24_c1.txt summary for error cases.
func summary(t *testing.T, old, new string) []byte {
	t.Helper()
	return edit(t, "oslat24_c1.txt", old, new)
}

func TestParseOslatRefusesBrokenOutput(t *testing.T) {
	c1 := string(fixture(t, "oslat24_c1.txt"))
	for _, tc := range []struct {
		name string
		out  []byte
		line int
		msg  string
	}{
		{"empty output", []byte("\n\r\n  \n"), 0, "empty output"},
		{"usage text", fixture(t, "oslat24_help.txt"), 2, "usage text"},
		{"rows without their Core line", fixture(t, "rt-tests_commit_4aeacf7_oslat_buckets_before_after.txt"), 1, "before any Core: line"},
		{"no summary at all", fixture(t, "cyclictest24_q.txt"), 0, "no Core: line"},
		{"output cut inside the histogram", []byte(c1[:strings.Index(c1, "    011 (us)")]), 25, "ends inside the oslat summary, before its last histogram bucket"},
		{"output cut before Duration", []byte(c1[:strings.Index(c1, "    Duration")]), 51, "before its Duration: line"},
		{"blank line for Duration", summary(t, "    Duration:\t 2.998 (sec)\n", ""), 52, "unexpected line inside the oslat summary, where the Duration: line belongs"},
		{"unit of a row cut off", summary(t, "Maximum:\t 54040 (us)", "Maximum:\t 54040"), 50, "does not end with (us)"},
		{"no overflow bucket", summary(t, " 204 (including overflows)", " 204"), 48, "no last bucket marked (including overflows)"},
		{"bucket row short of a column", summary(t, "Core:\t 1\nCounter Freq:\t 2597 (Mhz)", "Core:\t 1 2\nCounter Freq:\t 2597 2597 (Mhz)"), 16, "1 counts for 2 CPUs"},
		{"stat row short of a column", summary(t, "Core:\t 1", "Core:\t 1 2"), 15, "1 values for 2 CPUs"},
		{"CPU twice", summary(t, "Core:\t 1", "Core:\t 1 1"), 14, "CPU 1 is listed twice"},
		{"count beyond int64", summary(t, "001 (us):\t 120076302", "001 (us):\t 99999999999999999999"), 16, "not a number kbisect can hold"},
		{"samples overflow int64", summary(t, "001 (us):\t 120076302", "001 (us):\t 9223372036854775807"), 17, "sample count of CPU 1 overflows"},
		{"buckets out of order", summary(t, "002 (us)", "001 (us)"), 17, "does not follow"},
		{"Max-Min disagrees", summary(t, "Max-Min:\t 54039", "Max-Min:\t 54038"), 51, "Max-Min of CPU 1"},
		{"maximum below minimum", summary(t, "Maximum:\t 54040 (us)\n     Max-Min:\t 54039", "Maximum:\t 0 (us)\n     Max-Min:\t 0"), 50, "Maximum 0s of CPU 1 is below its Minimum 1µs"},
		{"stray line inside", summary(t, "    010 (us)", "garbage\n    010 (us)"), 25, "unexpected line inside the oslat summary"},
		{"second summary", []byte(c1 + c1[strings.Index(c1, "        Core"):]), 54, "a second oslat summary"},
		{"Core before Counter Freq", summary(t, "Counter Freq:\t 2597 (Mhz)", "Core:\t 2"), 15, "second Core: line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseOslat(tc.out)
			if m != nil {
				t.Errorf("got a result with the error: %+v", m)
			}
			wantParseError(t, err, tc.line, tc.msg)
		})
	}
}

func TestParseOslatSkipsZeroOmitDotsAndReadsNewerLabels(t *testing.T) {
	// rt-tests 2.7 with -z and -W 500: "(MHz)", bucket labels and extrema
	// with 3 decimals, "..." for runs of empty buckets.
	out := "oslat V 2.70\n" +
		"        Core:\t 2 3\n" +
		"Counter Freq:\t 2400 2400 (MHz)\n" +
		"    ...\n" +
		"   1.000 (us):\t 900 800\n" +
		"    ...\n" +
		"   4.500 (us):\t 0 7\n" +
		"   5.000 (us):\t 2 0 (including overflows)\n" +
		"     Minimum:\t 0.250 0.750 (us)\n" +
		"     Average:\t 1.010 1.030 (us)\n" +
		"     Maximum:\t 12.500 4.250 (us)\n" +
		"     Max-Min:\t 12.250 3.500 (us)\n" +
		"    Duration:\t 1.000 1.001 (sec)\n"
	m, err := ParseOslat([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, m)
	ns := time.Nanosecond
	checkLatency(t, m, []latencyWant{
		{2, 902, 250 * ns, 1010 * ns, 12500 * ns, 3, Bucket{us, 900}, Bucket{5 * us, 2}},
		{3, 807, 750 * ns, 1030 * ns, 4250 * ns, 3, Bucket{us, 800}, Bucket{5 * us, 0}},
	})
	if m.Version != "2.70" || m.Duration != 1001*time.Millisecond {
		t.Errorf("version %q duration %v", m.Version, m.Duration)
	}
}

func TestParseOslatClampsAnAverageAboveTheMaximumWithAWarning(t *testing.T) {
	// 2.7+ floors latencies, so a sub-µs run reports max 0 while the
	// average of bucket bounds is 1.
	out := summary(t, "Minimum:\t 1 (us)\n     Average:\t 1.002 (us)\n     Maximum:\t 54040 (us)\n     Max-Min:\t 54039",
		"Minimum:\t 0 (us)\n     Average:\t 1.002 (us)\n     Maximum:\t 0 (us)\n     Max-Min:\t 0")
	m, err := ParseOslat(out)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, m)
	if m.CPUs[0].Latency.Avg != 0 || len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], "CPU 1: oslat's average 1.002µs") {
		t.Errorf("avg %v warnings %q", m.CPUs[0].Latency.Avg, m.Warnings)
	}
}

// oslatJSON is a two-thread oslat --json file for JSON cases.
const oslatJSON = `{
  "file_version": 1,
  "cmdline:": "oslat -c 2,3 --json=x.json",
  "rt_test_version:": "2.70",
  "num_threads": 2,
  "thread": {
    "0": {
      "cpu": 3,
      "freq": 2400,
      "min": 1,
      "avg": 1.001578,
      "max": 40,
      "duration": 2.998,
      "histogram": {
        "1": 500,
        "32": 2
      }
    },
    "1": {
      "cpu": 2,
      "freq": 2400,
      "min": 1,
      "avg": 1.5,
      "max": 9,
      "duration": 3.001,
      "histogram": {
        "1": 10,
        "3": 1
      }
    }
  }
}
`

func TestParseOslatJSONTakesCPUsFromTheirThreads(t *testing.T) {
	m, err := ParseOslat([]byte(oslatJSON))
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, m)
	checkLatency(t, m, []latencyWant{
		{2, 11, us, 1500 * time.Nanosecond, 9 * us, 2, Bucket{us, 10}, Bucket{3 * us, 1}},
		{3, 502, us, 1002 * time.Nanosecond, 40 * us, 2, Bucket{us, 500}, Bucket{32 * us, 2}},
	})
	if m.Version != "2.70" || m.Duration != 3001*time.Millisecond {
		t.Errorf("version %q duration %v", m.Version, m.Duration)
	}
}

func TestParseOslatJSONReadsNanosecondExtremaWhenBucketsHaveDecimals(t *testing.T) {
	// 2.5+ with -W 500 writes keys with 3 decimals and min/max in ns.
	js := strings.NewReplacer(`"1": 500,`, `"0.500": 500,`, `"32": 2`, `"16.000": 2`,
		`"min": 1,
      "avg": 1.001578,
      "max": 40,`, `"min": 250,
      "avg": 1.001578,
      "max": 40000,`).Replace(oslatJSON)
	m, err := ParseOslat([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	l := m.CPUs[1].Latency
	if l.Min != 250*time.Nanosecond || l.Max != 40*us || l.Histogram[0].Upper != 500*time.Nanosecond {
		t.Errorf("got %+v", l)
	}
}

func TestParseOslatJSONNanAverageMeansNoSamples(t *testing.T) {
	js := strings.Replace(oslatJSON, `"avg": 1.5,`, `"avg": -nan,`, 1)
	js = strings.Replace(js, `"1": 10,
        "3": 1`, ``, 1)
	m, err := ParseOslat([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.CPUs) != 1 || m.CPUs[0].CPU != 3 || len(m.Warnings) != 1 || m.Warnings[0] != "thread 1 (CPU 2) recorded no samples" {
		t.Errorf("got CPUs %+v warnings %q", m.CPUs, m.Warnings)
	}
}

func TestParseOslatRefusesBrokenJSON(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		line           int
		msg            string
	}{
		{"syntax error", `"freq": 2400,`, `"freq": 2400,,`, 9, "invalid JSON"},
		{"nan outside avg", `"min": 1,`, `"min": nan,`, 10, "invalid JSON"},
		{"nan with samples", `"avg": 1.5,`, `"avg": nan,`, 23, "avg is nan but the histogram holds 11 samples"},
		{"truncated", "    }\n  }\n}\n", "    }\n", 30, "unexpected end of JSON input"},
		{"duplicate key", `"max": 9,`, `"max": 9, "max": 10,`, 24, `key "max" appears twice`},
		{"CPU twice", `"cpu": 2,`, `"cpu": 3,`, 20, "CPU 3 is measured by threads 0 and 1"},
		{"thread count", `"num_threads": 2`, `"num_threads": 3`, 5, "num_threads is 3 but 2 threads follow"},
		{"missing key", `"duration": 3.001,`, ``, 19, `thread 1: no "duration" value`},
		{"negative CPU", `"cpu": 2,`, `"cpu": -2,`, 20, "cpu -2 is not a CPU number"},
		{"fractional CPU", `"cpu": 2,`, `"cpu": 2.5,`, 20, "thread 1: cpu 2.5 is not a CPU number"},
		{"empty histogram", `"1": 10,
        "3": 1`, ``, 26, "thread 1: the histogram holds no samples but avg is 1.5"},
		{"thread key not an index", `"1": {`, `"01": {`, 19, `thread key "01" is not a thread index`},
		{"no threads", `"thread": {`, `"threads": {`, 0, "the JSON holds no thread results"},
		{"max below min", `"max": 9,`, `"max": 0,`, 24, "max 0s is below min 1µs"},
		{"exponent", `"max": 9,`, `"max": 9e3,`, 24, "not a number kbisect can hold"},
		{"huge count", `"3": 1`, `"3": 99999999999999999999`, 28, "bucket 3 count"},
		{"data after", "  }\n}\n", "  }\n}\n{}\n", 33, "after top-level value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(oslatJSON, tc.old) {
				t.Fatalf("no %q", tc.old)
			}
			_, err := ParseOslat([]byte(strings.Replace(oslatJSON, tc.old, tc.new, 1)))
			wantParseError(t, err, tc.line, tc.msg)
		})
	}
}

func FuzzParseOslat(f *testing.F) {
	for _, name := range []string{
		"oslat24_c1.txt", "oslat24_c1.json", "oslat24_c01_zq.txt", "oslat24_T5.txt", "oslat24_help.txt",
		"lab612rt-smp2-oslat.txt", "lab612rt-smp2-inject-oslat.txt",
		"github_redhat-nfvpe-container-perf-tools_oslat_1.10_CPUFreq.txt",
		"rt-tests_commit_4aeacf7_oslat_buckets_before_after.txt",
	} {
		f.Add(fixture(f, name))
	}
	f.Add([]byte(oslatJSON))
	f.Fuzz(func(t *testing.T, out []byte) {
		m, err := ParseOslat(out)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			if m != nil && (!m.StopHit || len(m.CPUs) != 0) {
				t.Fatalf("partial result with the error: %+v", m)
			}
			return
		}
		checkInvariants(t, m)
	})
}
