package noise

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Unit kinds of metrics.
const (
	KindTime    = "time"    // values in nanoseconds
	KindCount   = "count"   // events per period (osnoise) or per run
	KindPercent = "percent" // 0 to 100
	KindNumber  = "number"  // a command's number without a time unit
)

// MetricInfo describes one metric: its name in job files, its kind, and
// whether higher values are worse.
type MetricInfo struct {
	Name        string
	Kind        string
	HigherIsBad bool
}

var osnoiseMetricInfo = []MetricInfo{
	{"max_single_noise", KindTime, true},
	{"noise", KindTime, true},
	{"availability", KindPercent, false},
	{"hw", KindCount, true},
	{"nmi", KindCount, true},
	{"irq", KindCount, true},
	{"sirq", KindCount, true},
	{"thread", KindCount, true},
}

var latencyMetricInfo = []MetricInfo{
	{"max_latency", KindTime, true},
	{"avg_latency", KindTime, true},
}

// Metrics returns the metrics a tool reports, its default first; they
// match the job file's verdict.metric values.
func Metrics(tool string) []MetricInfo {
	switch tool {
	case ToolOsnoise, ToolRtlaOsnoise:
		return osnoiseMetricInfo
	case ToolRtlaTimerlat:
		return []MetricInfo{{"thread_latency", KindTime, true}, {"irq_latency", KindTime, true}, {"user_latency", KindTime, true}}
	case ToolOslat, ToolCyclictest:
		return latencyMetricInfo
	case ToolCommand:
		return []MetricInfo{{"value", KindNumber, true}}
	}
	return nil
}

// Metric looks a metric of a tool up by name.
func Metric(tool, name string) (MetricInfo, error) {
	var names []string
	for _, m := range Metrics(tool) {
		if m.Name == name {
			return m, nil
		}
		names = append(names, m.Name)
	}
	return MetricInfo{}, fmt.Errorf("%s does not report %q (it reports %s)", tool, name, strings.Join(names, ", "))
}

// MetricValues returns the metric for every CPU (or every number of a
// command): times in nanoseconds, availability in percent (each CPU's
// worst period), interference counts per period.
func (m *Measurement) MetricValues(name string) ([]float64, error) {
	info, err := Metric(m.Tool, name)
	if err != nil {
		return nil, err
	}
	if m.Tool == ToolCommand {
		if len(m.Numbers) == 0 {
			return nil, fmt.Errorf("the command printed no number")
		}
		return append([]float64(nil), m.Numbers...), nil
	}
	var out []float64
	for _, c := range m.CPUs {
		v, ok := c.metric(info.Name)
		if !ok {
			return nil, fmt.Errorf("CPU %d: this %s output does not report %s", c.CPU, m.Tool, name)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CPU reported %s", name)
	}
	return out, nil
}

// metric is one CPU's value of a metric, false when its output lacks it.
func (c *CPU) metric(name string) (float64, bool) {
	ns := func(d time.Duration) float64 { return float64(d) }
	lat := func(l *Latency, max bool) (float64, bool) {
		if l == nil {
			return 0, false
		}
		if max {
			return ns(l.Max), true
		}
		return ns(l.Avg), true
	}
	switch name {
	case "max_latency", "thread_latency":
		return lat(c.Latency, true)
	case "avg_latency":
		return lat(c.Latency, false)
	case "irq_latency":
		return lat(c.IRQLatency, true)
	case "user_latency":
		return lat(c.UserLatency, true)
	}
	o := c.Osnoise
	if o == nil {
		return 0, false
	}
	if name == "max_single_noise" {
		return ns(o.MaxSingle), true
	}
	if o.Periods == 0 {
		return 0, false // a histogram of single noises: no per-period account
	}
	perPeriod := func(n Count) float64 { return float64(n) / float64(o.Periods) }
	switch name {
	case "noise":
		return ns(o.MaxNoise), true
	case "availability":
		return float64(o.MinAvailable), true
	case "hw":
		return perPeriod(o.HW), !o.NoHW
	case "nmi":
		return perPeriod(o.NMI), true
	case "irq":
		return perPeriod(o.IRQ), true
	case "sirq":
		return perPeriod(o.SIRQ), true
	case "thread":
		return perPeriod(o.Thread), true
	}
	return 0, false
}

// Aggregates are the ways the values of one sample combine into the
// sample's value: the worst CPU (max), a high percentile, the median or
// mean CPU, the best CPU (min).
var Aggregates = []string{"max", "p99", "p90", "median", "mean", "min"}

// Aggregate combines the per-CPU values of one sample. Percentiles
// interpolate linearly between the nearest ranks.
func Aggregate(vals []float64, how string) (float64, error) {
	if len(vals) == 0 {
		return 0, fmt.Errorf("no values to aggregate")
	}
	s := append([]float64(nil), vals...)
	sort.Float64s(s)
	switch how {
	case "max":
		return s[len(s)-1], nil
	case "min":
		return s[0], nil
	case "median":
		return quantile(s, 0.5), nil
	case "p90":
		return quantile(s, 0.9), nil
	case "p99":
		return quantile(s, 0.99), nil
	case "mean":
		sum := 0.0
		for _, v := range s {
			sum += v
		}
		return sum / float64(len(s)), nil
	}
	return 0, fmt.Errorf("unknown aggregate %q (one of %s)", how, strings.Join(Aggregates, ", "))
}

// AggregateWorst is Aggregate with "max" meaning the worst CPU whichever
// way is worse: for a metric where lower is bad (availability), the values
// are mirrored, so max picks the lowest and p99 the low tail.
func AggregateWorst(vals []float64, how string, higherIsBad bool) (float64, error) {
	if higherIsBad {
		return Aggregate(vals, how)
	}
	neg := make([]float64, len(vals))
	for i, v := range vals {
		neg[i] = -v
	}
	v, err := Aggregate(neg, how)
	return -v, err
}

// quantile of sorted values, interpolating between ranks.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

// Tidy is a value of kind as JSON should carry it: a time in whole
// nanoseconds, anything else to 6 significant digits. Values computed
// through logs (a geometric mean, a model's level) otherwise come out as
// 999999.9999999995.
func Tidy(kind string, v float64) float64 {
	if kind == KindTime {
		return math.Round(v)
	}
	return Significant(v, 6)
}

// Significant rounds v to n significant digits.
func Significant(v float64, n int) float64 {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return v
	}
	f, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', n, 64), 64)
	if err != nil {
		return v
	}
	return f
}
