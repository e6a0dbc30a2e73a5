package report

import (
	"fmt"
	"io"
	"kbisect/internal/wrap"
	"kbisect/noise"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteABSummary writes the A/B summary in the layout of a regression report:
// each side's ranges across CPUs and samples side by side, then the
// comparison and the conclusion.
func WriteABSummary(w io.Writer, r *noise.ABReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Summary across all measured CPUs (%s):\n\n", abSizes(r))
	tw := tabwriter.NewWriter(&b, 0, 0, 3, ' ', 0)
	fmt.Fprintf(tw, "\t%s\t%s\n", sideHead("A", r.A.Name), sideHead("B", r.B.Name))
	for _, row := range abRangeRows(r) {
		fmt.Fprintf(tw, "  %s:\t%s\t%s\n", row[0], row[1], row[2])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\n")
	for _, line := range abComparisonLines(r) {
		b.WriteString(wrap.Lines(line, wrap.Width, "  ", "    ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteABSummaryMarkdown writes the A/B summary as a markdown table and list.
func WriteABSummaryMarkdown(w io.Writer, r *noise.ABReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Summary across all measured CPUs (%s):\n\n", abSizes(r))
	fmt.Fprintf(&b, "| | %s | %s |\n|---|---:|---:|\n", sideHead("A", r.A.Name), sideHead("B", r.B.Name))
	for _, row := range abRangeRows(r) {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", row[0], row[1], row[2])
	}
	b.WriteString("\n")
	for _, line := range abComparisonLines(r) {
		b.WriteString("- " + line + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// sideHead heads a side's column: "A: name", or "A" when the name is
// said elsewhere.
func sideHead(side, name string) string {
	if name == "" {
		return side
	}
	return side + ": " + name
}

func abSizes(r *noise.ABReport) string {
	cpus := fmt.Sprintf("%d CPUs", r.A.CPUs)
	if r.A.CPUs == 1 {
		cpus = "1 CPU"
	}
	if r.A.CPUs != r.B.CPUs {
		cpus = fmt.Sprintf("%d and %d CPUs", r.A.CPUs, r.B.CPUs)
	}
	return fmt.Sprintf("%s, %d and %d samples", cpus, r.A.Samples, r.B.Samples)
}

func abRangeRows(r *noise.ABReport) [][3]string {
	var rows [][3]string
	for i, ra := range r.A.Ranges {
		if i >= len(r.B.Ranges) || r.B.Ranges[i].Metric != ra.Metric || ra.Metric == "hw" || ra.Metric == "nmi" || ra.Metric == "sirq" {
			continue // the report's block keeps to what tells kernels apart
		}
		rb := r.B.Ranges[i]
		rows = append(rows, [3]string{rangeLabel(ra.Metric), abRangeText(r, ra), abRangeText(r, rb)})
	}
	return rows
}

func rangeLabel(metric string) string {
	switch metric {
	case "max_single_noise":
		return "Max single noise"
	case "noise":
		return "Noise per period"
	case "availability":
		return "CPU availability"
	case "irq", "thread":
		return strings.ToUpper(metric) + " count per period"
	}
	l := noise.MetricLabel(metric)
	return strings.ToUpper(l[:1]) + l[1:]
}

func abRangeText(r *noise.ABReport, rs noise.RangeSummary) string {
	lo, hi := noise.FormatMetric(rs.Kind, rs.Metric, rs.Min), noise.FormatMetric(rs.Kind, rs.Metric, rs.Max)
	if lo == hi {
		return lo
	}
	if rs.Kind == noise.KindTime && unitSuffix(hi) == " µs" && unitSuffix(lo) != " µs" {
		lo = noise.TrimZeros(strconv.FormatFloat(rs.Min/1e3, 'f', 3, 64)) + " µs" // "0 - 7 µs"
	}
	// "44,343 - 50,294 µs": the unit once.
	if u := unitSuffix(lo); u != "" && u == unitSuffix(hi) {
		lo = strings.TrimSuffix(lo, u)
	}
	return lo + " - " + hi
}

func unitSuffix(s string) string {
	for _, u := range []string{" ns", " µs", " s", "%"} {
		if strings.HasSuffix(s, u) {
			return u
		}
	}
	return ""
}

func abComparisonLines(r *noise.ABReport) []string {
	c := r.Comparison
	per := fmt.Sprintf("%s of the %s CPU per sample", noise.MetricLabel(r.Metric), aggregateLabel(r.Aggregate))
	lines := []string{
		fmt.Sprintf("%s: median A %s, B %s", per, noise.FormatMetric(r.Kind, r.Metric, r.A.Median), noise.FormatMetric(r.Kind, r.Metric, r.B.Median)),
		fmt.Sprintf("B − A: %s, %g%% interval [%s, %s]; Mann-Whitney %s (%d vs %d %s%s)",
			signed(r.Kind, r.Metric, c.Shift), c.Confidence*100, signed(r.Kind, r.Metric, c.ShiftLow), signed(r.Kind, r.Metric, c.ShiftHigh),
			noise.PValueText(c.P), c.NA, c.NB, abPerText(r), map[bool]string{true: ", exact", false: ""}[c.Exact]),
	}
	for _, w := range c.Warnings {
		lines = append(lines, "warning: "+w)
	}
	return append(lines, r.Conclusion)
}

func abPerText(r *noise.ABReport) string {
	if r.PerWhat() == "boot" {
		return "boots, each its samples' median"
	}
	return "samples"
}

func aggregateLabel(how string) string {
	switch how {
	case "max":
		return "worst"
	case "min":
		return "best"
	case "mean":
		return "mean"
	}
	return how
}

func signed(kind, metric string, v float64) string {
	s := noise.FormatMetric(kind, metric, v)
	if v > 0 {
		return "+" + s
	}
	return s
}
