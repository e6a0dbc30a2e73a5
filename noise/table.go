package noise

import (
	"math"
	"strconv"
	"strings"
)

// Summary is a measurement across its CPUs: for each metric of the tool,
// the worst CPU and the median CPU (robust against one noisy CPU).
type Summary struct {
	CPUs    int             `json:"cpus"`
	Metrics []MetricSummary `json:"metrics"`
}

// MetricSummary is one metric across CPUs, in the metric's unit
// (nanoseconds for times).
type MetricSummary struct {
	Metric   string  `json:"metric"`
	Kind     string  `json:"kind"`
	Worst    float64 `json:"worst"`
	WorstCPU int     `json:"worst_cpu"`
	Median   float64 `json:"median"`
}

// Summarize computes the summary of every metric the measurement has.
func Summarize(m *Measurement) Summary {
	s := Summary{CPUs: len(m.CPUs)}
	for _, info := range Metrics(m.Tool) {
		vals, err := m.MetricValues(info.Name)
		if err != nil {
			continue // this output lacks it (a histogram has no counters)
		}
		ms := MetricSummary{Metric: info.Name, Kind: info.Kind}
		ms.Worst, _ = AggregateWorst(vals, "max", info.HigherIsBad)
		ms.Median, _ = Aggregate(vals, "median")
		ms.WorstCPU = -1
		for i, v := range vals {
			if v == ms.Worst && i < len(m.CPUs) {
				ms.WorstCPU = m.CPUs[i].CPU
				break
			}
		}
		s.Metrics = append(s.Metrics, ms)
	}
	return s
}

// MetricLabel names a metric for people.
func MetricLabel(name string) string {
	switch name {
	case "max_single_noise":
		return "max single noise"
	case "noise":
		return "noise per period (worst period)"
	case "availability":
		return "CPU availability"
	case "hw", "nmi", "irq", "sirq", "thread":
		return strings.ToUpper(name) + " count per period"
	}
	return strings.ReplaceAll(name, "_", " ")
}

// FormatMetric writes a value of a metric: a count with its thousands
// grouped, anything else as FormatValue writes it.
func FormatMetric(kind, name string, v float64) string {
	if kind == KindCount {
		return groupThousands(v)
	}
	return FormatValue(kind, v)
}

// groupThousands writes 6864 as 6,864 and keeps one decimal when there is
// one to keep (a count averaged over periods).
func groupThousands(v float64) string {
	s := strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
	intPart, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	var b strings.Builder
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	out := b.String()
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}
