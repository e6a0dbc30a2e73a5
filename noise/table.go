package noise

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"kbisect/internal/wrap"
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

// WriteTable writes the per-CPU table of a measurement in the layout RT
// people paste into mail, units in the header, and its summary below.
func WriteTable(w io.Writer, m *Measurement) error {
	return writeTable(w, m, false)
}

// WriteMarkdown writes the same table as WriteTable in markdown.
func WriteMarkdown(w io.Writer, m *Measurement) error {
	return writeTable(w, m, true)
}

// tableRows returns the header and rows of a measurement's table.
func tableRows(m *Measurement) (header []string, rows [][]string) {
	if m.Tool == ToolCommand {
		header = []string{"#", "VALUE"}
		for i, v := range m.Numbers {
			rows = append(rows, []string{strconv.Itoa(i + 1), commandValue(m, v)})
		}
		return header, rows
	}
	osn, lat, irq, usr := false, false, false, false
	for _, c := range m.CPUs {
		// rtla osnoise hist knows single noises only: its latency
		// columns say it all.
		osn = osn || (c.Osnoise != nil && c.Osnoise.Periods > 0)
		lat = lat || c.Latency != nil
		irq = irq || c.IRQLatency != nil
		usr = usr || c.UserLatency != nil
	}
	header = []string{"CPU"}
	if osn {
		header = append(header, "PERIODS", "RUNTIME(us)", "NOISE(us)", "AVAIL%", "MAX_SINGLE(us)", "HW", "NMI", "IRQ", "SIRQ", "THREAD")
	}
	latHeader := func(prefix string) []string {
		return []string{prefix + "SAMPLES", prefix + "MIN(us)", prefix + "AVG(us)", prefix + "MAX(us)"}
	}
	if irq {
		header = append(header, latHeader("IRQ_")...)
	}
	if lat {
		prefix := ""
		switch {
		case irq || usr:
			prefix = "THREAD_"
		case m.Tool == ToolRtlaOsnoise || m.Tool == ToolOsnoise:
			prefix = "NOISE_"
		}
		header = append(header, latHeader(prefix)...)
	}
	if usr {
		header = append(header, latHeader("USER_")...)
	}
	for _, c := range m.CPUs {
		row := []string{fmt.Sprintf("[%03d]", c.CPU)}
		if osn {
			row = append(row, osnoiseCells(c.Osnoise)...)
		}
		for _, l := range []struct {
			on  bool
			lat *Latency
		}{{irq, c.IRQLatency}, {lat, c.Latency}, {usr, c.UserLatency}} {
			if l.on {
				row = append(row, latencyCells(l.lat)...)
			}
		}
		rows = append(rows, row)
	}
	return header, rows
}

func osnoiseCells(o *Osnoise) []string {
	if o == nil {
		return []string{"-", "-", "-", "-", "-", "-", "-", "-", "-", "-"}
	}
	if o.Periods == 0 {
		// A histogram of single noises: only the longest is known.
		return []string{"-", "-", "-", "-", usText(o.MaxSingle), "-", "-", "-", "-", "-"}
	}
	hw := count64(o.HW)
	if o.NoHW {
		hw = "-"
	}
	return []string{
		strconv.Itoa(o.Periods), usText(o.Runtime), usText(o.Noise),
		strconv.FormatFloat(float64(o.Available), 'f', 5, 64), usText(o.MaxSingle),
		hw, count64(o.NMI), count64(o.IRQ), count64(o.SIRQ), count64(o.Thread),
	}
}

func latencyCells(l *Latency) []string {
	if l == nil {
		return []string{"-", "-", "-", "-"}
	}
	return []string{count64(l.Samples), usText(l.Min), usText(l.Avg), usText(l.Max)}
}

func count64(c Count) string { return strconv.FormatInt(int64(c), 10) }

// usText writes a duration in microseconds, with decimals only when it
// has them (timerlat --nano, oslat's averages).
func usText(d time.Duration) string {
	if d%time.Microsecond == 0 {
		return strconv.FormatInt(int64(d/time.Microsecond), 10)
	}
	return strconv.FormatFloat(float64(d)/1e3, 'f', -1, 64)
}

func commandValue(m *Measurement, v float64) string {
	if m.Unit == "ns" {
		return formatNS(v)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func writeTable(w io.Writer, m *Measurement, markdown bool) error {
	header, rows := tableRows(m)
	var b strings.Builder
	if markdown {
		b.WriteString("| " + strings.Join(header, " | ") + " |\n")
		b.WriteString("|" + strings.Repeat("---:|", len(header)) + "\n")
		for _, r := range rows {
			b.WriteString("| " + strings.Join(r, " | ") + " |\n")
		}
	} else {
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	b.WriteString("\n")
	for _, line := range summaryLines(m) {
		if markdown {
			b.WriteString("- " + line + "\n")
			continue
		}
		b.WriteString(wrap.Lines(line, wrap.Width, "", "  ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// summaryLines say, for each metric, the worst and the median CPU, and
// what a reader must know about the run.
func summaryLines(m *Measurement) []string {
	var lines []string
	if m.Tool != ToolCommand {
		s := Summarize(m)
		for _, ms := range s.Metrics {
			lines = append(lines, fmt.Sprintf("%s: worst %s (CPU %d), median CPU %s", metricLabel(ms.Metric), formatMetric(ms.Kind, ms.Metric, ms.Worst), ms.WorstCPU, formatMetric(ms.Kind, ms.Metric, ms.Median)))
		}
	}
	if m.StopHit {
		lines = append(lines, "the tool stopped on its own threshold: these numbers cover less than the duration asked for")
	}
	for _, w := range m.Warnings {
		lines = append(lines, "warning: "+w)
	}
	return lines
}

// metricLabel names a metric for people.
func metricLabel(name string) string {
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

func formatMetric(kind, name string, v float64) string {
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
