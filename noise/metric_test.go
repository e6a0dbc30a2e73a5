package noise

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"kbisect/configs"
)

// TestMetricNamesAreTheJobFilesOnes keeps the job file schema and the
// metrics noise computes in step.
func TestMetricNamesAreTheJobFilesOnes(t *testing.T) {
	for _, tool := range configs.Tools {
		var want, got []string
		for _, m := range configs.Metrics(tool) {
			want = append(want, m.Name)
		}
		for _, m := range Metrics(tool) {
			got = append(got, m.Name)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: noise has %v, configs %v", tool, got, want)
		}
	}
	if strings.Join(Aggregates, ",") != strings.Join(configs.Aggregates, ",") {
		t.Errorf("aggregates: %v vs %v", Aggregates, configs.Aggregates)
	}
}

func TestMetricValuesOfTheSeedTables(t *testing.T) {
	bad, err := ParseOsnoise(fixture(t, "seed-000-spinlock-table.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// CPUs 1, 4, 7, 8, 16, 33, in that order.
	for metric, want := range map[string][]float64{
		"max_single_noise": {14e3, 14e3, 14e3, 14e3, 20e3, 15e3},
		"noise":            {50163e3, 50294e3, 49782e3, 44343e3, 48551e3, 49528e3},
		"irq":              {6864, 6864, 6864, 6864, 6863, 6864},
		"thread":           {5922, 5920, 5921, 5925, 5942, 5922},
	} {
		got, err := bad.MetricValues(metric)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, %v; want %v", metric, got, err, want)
		}
	}
	avail, err := bad.MetricValues("availability")
	if err != nil {
		t.Fatal(err)
	}
	worst, _ := AggregateWorst(avail, "max", false)
	if worst != 94.705 {
		t.Errorf("worst availability %v, want CPU 4's 94.705", worst)
	}
	if _, err := bad.MetricValues("max_latency"); err == nil || !strings.Contains(err.Error(), `osnoise does not report "max_latency"`) {
		t.Errorf("got %v", err)
	}
}

func TestMetricValuesOfLatencyTools(t *testing.T) {
	m, err := Parse(ToolOslat, fixture(t, "lab612rt-smp2-inject-oslat.txt"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := m.MetricValues("max_latency")
	if err != nil || len(v) != 1 || time.Duration(v[0]) != 6178*time.Microsecond {
		t.Errorf("oslat max %v %v", v, err)
	}
	tl, err := Parse(ToolRtlaTimerlat, fixture(t, "lab612rt-smp2-rtla-timerlat-top.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tl.MetricValues("thread_latency"); err != nil {
		t.Error(err)
	}
	hist, err := Parse(ToolRtlaOsnoise, fixture(t, "rtla-doc_osnoise-hist.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hist.MetricValues("irq"); err == nil || !strings.Contains(err.Error(), "does not report irq") {
		t.Errorf("a noise histogram has no interference counts: %v", err)
	}
}

func TestAggregates(t *testing.T) {
	vals := []float64{5, 1, 4, 2, 3}
	for how, want := range map[string]float64{"max": 5, "min": 1, "median": 3, "mean": 3, "p90": 4.6, "p99": 4.96} {
		got, err := Aggregate(vals, how)
		if err != nil || math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, %v; want %v", how, got, err, want)
		}
	}
	if w, _ := AggregateWorst(vals, "p90", false); math.Abs(w-1.4) > 1e-9 {
		t.Errorf("lower is bad: p90 of the worst = %v, want 1.4", w)
	}
	if _, err := Aggregate(nil, "max"); err == nil {
		t.Error("no values aggregated")
	}
	if _, err := Aggregate(vals, "p50"); err == nil {
		t.Error("unknown aggregate accepted")
	}
}

func TestCommandNumbersByPatternAndJSONPath(t *testing.T) {
	// The epoll benchmark of the third seed prints run times per thread count.
	out := "threads   w/ wq.lock   w/o wq.lock\n-------   ----------   -----------\n      8        8581ms        8602ms\n     16       13800ms       13715ms\n"
	m, err := ParseCommand([]byte(out), CommandMetric{Pattern: regexp.MustCompile(`^\s+8\s+(\d+)ms`), Unit: time.Millisecond})
	if err != nil || len(m.Numbers) != 1 || m.Numbers[0] != 8581e6 || m.Unit != "ns" {
		t.Errorf("pattern: %+v %v", m, err)
	}
	all, err := ParseCommand([]byte(out), CommandMetric{Pattern: regexp.MustCompile(`(?P<value>\d+)ms`)})
	if err != nil || len(all.Numbers) != 4 || all.Numbers[3] != 13715 || all.Unit != "number" {
		t.Errorf("every match: %+v %v", all, err)
	}
	js := `{"results": [{"ops_per_sec": 1234.5}, {"ops_per_sec": "99"}], "lat": [1, 2, 3]}`
	for path, want := range map[string][]float64{"results[0].ops_per_sec": {1234.5}, "$.results[1].ops_per_sec": {99}, ".lat": {1, 2, 3}} {
		m, err := ParseCommand([]byte(js), CommandMetric{JSONPath: path})
		if err != nil || len(m.Numbers) != len(want) || m.Numbers[0] != want[0] {
			t.Errorf("%s: %+v %v", path, m, err)
		}
	}
	for _, c := range []struct {
		out  string
		cm   CommandMetric
		want string
	}{
		{out, CommandMetric{Pattern: regexp.MustCompile(`took (\d+)`)}, `matched nothing in the output (its last line: "16       13800ms       13715ms")`},
		{js, CommandMetric{JSONPath: "results[2].ops_per_sec"}, "$.results has no element 2"},
		{js, CommandMetric{JSONPath: "results[0].max"}, `$.results[0] has no key "max"`},
		{js, CommandMetric{JSONPath: "results"}, "$.results holds something that is not a number"},
		{"not json", CommandMetric{JSONPath: "a"}, "the output is not JSON"},
		{out, CommandMetric{}, "no pattern and no JSON path"},
	} {
		if _, err := ParseCommand([]byte(c.out), c.cm); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}
