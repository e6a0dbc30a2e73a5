package noise

import (
	"fmt"
	"math"
	"strconv"
)

// Side is one kernel's samples in an A/B comparison: the same workload run
// on the same host, one measurement per sample.
type Side struct {
	Name    string
	Samples []*Measurement
	// Boots, when set, is how many of the samples each boot took, in
	// order: the comparison is then of the boots' medians, since samples
	// of one boot share its luck (where the tick landed, cache colouring)
	// and more of them do not make a second boot.
	Boots []int
}

// ABReport is the evidence that two kernels differ (or do not): each
// side's ranges across CPUs and samples, as in the "Summary across all
// isolated cores" of a regression report, and the statistical comparison
// of one metric.
type ABReport struct {
	Tool      string      `json:"tool"`
	Metric    string      `json:"metric"`
	Kind      string      `json:"kind"`
	Aggregate string      `json:"aggregate"`
	A         SideSummary `json:"a"`
	B         SideSummary `json:"b"`
	// Comparison is of the per-sample values (the aggregate over CPUs),
	// or of the per-boot medians of those when the sides say their boots
	// (Per says which), B against A.
	Comparison Comparison `json:"comparison"`
	Per        string     `json:"per"` // "sample" or "boot"
	// CPUs is how many CPUs both sides measured; CPUsBetter on how many
	// every sample of B beats every sample of A, CPUsWorse the reverse.
	CPUs       int    `json:"cpus"`
	CPUsBetter int    `json:"cpus_better"`
	CPUsWorse  int    `json:"cpus_worse"`
	Conclusion string `json:"conclusion"`
	// Direction is "better" or "worse" when B differs significantly
	// from A, "" when it does not.
	Direction string `json:"direction,omitempty"`
}

// SideSummary is one side of an A/B comparison.
type SideSummary struct {
	Name    string         `json:"name"`
	Samples int            `json:"samples"`
	CPUs    int            `json:"cpus"`
	Values  []float64      `json:"values"`
	Median  float64        `json:"median"`
	Ranges  []RangeSummary `json:"ranges"`
}

// RangeSummary is a metric's smallest and largest value over every CPU
// and sample of one side.
type RangeSummary struct {
	Metric string  `json:"metric"`
	Kind   string  `json:"kind"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// CompareAB compares B with A on a metric (aggregated over CPUs per sample
// as the job says) at the given confidence.
func CompareAB(a, b Side, metric, aggregate string, confidence float64) (*ABReport, error) {
	if len(a.Samples) == 0 || len(b.Samples) == 0 {
		return nil, fmt.Errorf("A/B: each side needs at least one sample (A has %d, B %d)", len(a.Samples), len(b.Samples))
	}
	tool := a.Samples[0].Tool
	for _, m := range append(append([]*Measurement{}, a.Samples...), b.Samples...) {
		if m.Tool != tool {
			return nil, fmt.Errorf("A/B: samples of %s and %s cannot be compared", tool, m.Tool)
		}
	}
	info, err := Metric(tool, metric)
	if err != nil {
		return nil, err
	}
	r := &ABReport{Tool: tool, Metric: metric, Kind: info.Kind, Aggregate: aggregate}
	for _, s := range []struct {
		side Side
		out  *SideSummary
	}{{a, &r.A}, {b, &r.B}} {
		if *s.out, err = summarizeSide(s.side, info, aggregate); err != nil {
			return nil, err
		}
	}
	r.Per = "sample"
	av, bv := r.A.Values, r.B.Values
	if len(a.Boots) > 0 && len(b.Boots) > 0 {
		if av, err = BootMedians(r.A.Values, a.Boots); err != nil {
			return nil, fmt.Errorf("A/B, %s: %v", a.Name, err)
		}
		if bv, err = BootMedians(r.B.Values, b.Boots); err != nil {
			return nil, fmt.Errorf("A/B, %s: %v", b.Name, err)
		}
		r.Per = "boot"
	}
	r.Comparison = Compare(av, bv, confidence)
	r.countCPUs(a, b, info)
	r.Conclusion = r.conclude(info)
	if r.Comparison.Significant() {
		r.Direction = "worse"
		if (r.Comparison.U > float64(r.Comparison.NA*r.Comparison.NB)/2) != info.HigherIsBad {
			r.Direction = "better"
		}
	}
	return r, nil
}

func summarizeSide(s Side, info MetricInfo, aggregate string) (SideSummary, error) {
	out := SideSummary{Name: s.Name, Samples: len(s.Samples)}
	cpus := map[int]bool{}
	for i, m := range s.Samples {
		vals, err := m.MetricValues(info.Name)
		if err != nil {
			return out, fmt.Errorf("%s, sample %d: %v", s.Name, i+1, err)
		}
		v, err := AggregateWorst(vals, aggregate, info.HigherIsBad)
		if err != nil {
			return out, err
		}
		out.Values = append(out.Values, v)
		for _, c := range m.CPUs {
			cpus[c.CPU] = true
		}
	}
	out.CPUs = len(cpus)
	out.Median = Median(out.Values)
	for _, mi := range Metrics(s.Samples[0].Tool) {
		rs := RangeSummary{Metric: mi.Name, Kind: mi.Kind, Min: math.Inf(1), Max: math.Inf(-1)}
		ok := true
		for _, m := range s.Samples {
			vals, err := m.MetricValues(mi.Name)
			if err != nil {
				ok = false
				break
			}
			for _, v := range vals {
				rs.Min, rs.Max = math.Min(rs.Min, v), math.Max(rs.Max, v)
			}
		}
		if ok {
			out.Ranges = append(out.Ranges, rs)
		}
	}
	return out, nil
}

// BootMedians is the median of each boot's values, boots[i] values for
// boot i, in order.
func BootMedians(values []float64, boots []int) ([]float64, error) {
	var out []float64
	i := 0
	for _, n := range boots {
		if n < 1 || i+n > len(values) {
			return nil, fmt.Errorf("boots of %v samples do not cover %d values", boots, len(values))
		}
		out = append(out, Median(append([]float64(nil), values[i:i+n]...)))
		i += n
	}
	if i != len(values) {
		return nil, fmt.Errorf("boots of %v samples do not cover %d values", boots, len(values))
	}
	return out, nil
}

// countCPUs counts the CPUs where B is better (or worse) than A in every
// sample: the "on all 32 isolated CPUs" of a report.
func (r *ABReport) countCPUs(a, b Side, info MetricInfo) {
	perCPU := func(s Side) map[int][]float64 {
		out := map[int][]float64{}
		for _, m := range s.Samples {
			for _, c := range m.CPUs {
				if v, ok := c.metric(info.Name); ok {
					out[c.CPU] = append(out[c.CPU], v)
				}
			}
		}
		return out
	}
	av, bv := perCPU(a), perCPU(b)
	for cpu, as := range av {
		bs, ok := bv[cpu]
		if !ok {
			continue
		}
		r.CPUs++
		aLo, aHi := minMax(as)
		bLo, bHi := minMax(bs)
		if !info.HigherIsBad {
			aLo, aHi, bLo, bHi = -aHi, -aLo, -bHi, -bLo
		}
		switch {
		case bHi < aLo:
			r.CPUsBetter++
		case bLo > aHi:
			r.CPUsWorse++
		}
	}
}

func minMax(v []float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

// conclude says in one line what the comparison shows.
func (r *ABReport) conclude(info MetricInfo) string {
	c := r.Comparison
	p := PValueText(c.P)
	if !c.Significant() {
		s := fmt.Sprintf("no significant difference in %s (%s, %d vs %d %ss)", MetricLabel(r.Metric), p, c.NA, c.NB, r.PerWhat())
		if len(c.Warnings) > 0 {
			s += ": " + c.Warnings[0]
		}
		return s
	}
	// Which way B moved, from U rather than from the shift, which ties
	// can leave at 0: U above half the pairs means B tends larger.
	larger := c.U > float64(c.NA*c.NB)/2
	better := larger != info.HigherIsBad
	where := ""
	switch n := r.CPUs; {
	case n == 0:
	case n == 1 && (better && r.CPUsBetter == 1 || !better && r.CPUsWorse == 1):
		where = " on its one measured CPU"
	case better && r.CPUsBetter == n, !better && r.CPUsWorse == n:
		where = fmt.Sprintf(" on all %d CPUs", n)
	case better:
		where = fmt.Sprintf(" on %d of %d CPUs", r.CPUsBetter, n)
	default:
		where = fmt.Sprintf(" on %d of %d CPUs", r.CPUsWorse, n)
	}
	return r.factor(info, better, where) + ", " + p
}

// factor says how much better or worse B is, as a ratio of medians where
// that means something.
func (r *ABReport) factor(info MetricInfo, better bool, where string) string {
	a, b := r.A.Median, r.B.Median
	word := map[bool]string{true: "better", false: "worse"}[better]
	if info.HigherIsBad && (info.Kind == KindTime || info.Kind == KindCount) {
		word = map[bool]string{true: "less noisy", false: "noisier"}[better]
	}
	values := fmt.Sprintf("(%s: %s against %s)", shortLabel(r.Metric), FormatMetric(info.Kind, r.Metric, b), FormatMetric(info.Kind, r.Metric, a))
	lo, hi := math.Min(a, b), math.Max(a, b)
	if info.Kind == KindPercent || !info.HigherIsBad || lo <= 0 {
		return fmt.Sprintf("B is %s than A%s %s", word, where, values)
	}
	return fmt.Sprintf("B is %s× %s than A%s %s", ratioText(hi/lo), word, where, values)
}

// ratioText writes a ratio with two significant digits: 2.9, 41, 7,200.
func ratioText(x float64) string {
	if x < 10 {
		return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64)
	}
	mag := math.Pow(10, math.Floor(math.Log10(x))-1)
	return groupThousands(math.Round(x/mag) * mag)
}

// Label names a metric for people: "noise per period", "max single
// noise".
func Label(metric string) string { return shortLabel(metric) }

// shortLabel names a metric in a sentence.
func shortLabel(metric string) string {
	switch metric {
	case "noise":
		return "noise per period"
	case "availability":
		return "CPU availability"
	}
	return MetricLabel(metric)
}

// PValueText writes a p-value as the reports say it: "p < 0.001", "p = 0.012".
func PValueText(p float64) string {
	if p < 0.001 {
		return "p < 0.001"
	}
	return fmt.Sprintf("p = %.2g", p)
}

// PerWhat is what one value of the comparison is: a sample, or a boot.
func (r *ABReport) PerWhat() string {
	if r.Per == "" {
		return "sample"
	}
	return r.Per
}
