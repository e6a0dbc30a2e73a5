package report

import (
	"fmt"
	"io"
	"kbisect/internal/wrap"
	"kbisect/noise"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable writes the per-CPU table of a measurement in the layout RT
// people paste into mail, units in the header, and its summary below.
func WriteTable(w io.Writer, m *noise.Measurement) error {
	return writeTable(w, m, false)
}

// WriteTableMarkdown writes the same table as WriteTable in markdown.
func WriteTableMarkdown(w io.Writer, m *noise.Measurement) error {
	return writeTable(w, m, true)
}

// tableRows returns the header and rows of a measurement's table.
func tableRows(m *noise.Measurement) (header []string, rows [][]string) {
	if m.Tool == noise.ToolCommand {
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
		case m.Tool == noise.ToolRtlaOsnoise || m.Tool == noise.ToolOsnoise:
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
			lat *noise.Latency
		}{{irq, c.IRQLatency}, {lat, c.Latency}, {usr, c.UserLatency}} {
			if l.on {
				row = append(row, latencyCells(l.lat)...)
			}
		}
		rows = append(rows, row)
	}
	return header, rows
}

func osnoiseCells(o *noise.Osnoise) []string {
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

func latencyCells(l *noise.Latency) []string {
	if l == nil {
		return []string{"-", "-", "-", "-"}
	}
	return []string{count64(l.Samples), usText(l.Min), usText(l.Avg), usText(l.Max)}
}

func count64(c noise.Count) string { return strconv.FormatInt(int64(c), 10) }

// usText writes a duration in microseconds, with decimals only when it
// has them (timerlat --nano, oslat's averages).
func usText(d time.Duration) string {
	if d%time.Microsecond == 0 {
		return strconv.FormatInt(int64(d/time.Microsecond), 10)
	}
	return strconv.FormatFloat(float64(d)/1e3, 'f', -1, 64)
}

func commandValue(m *noise.Measurement, v float64) string {
	if m.Unit == "ns" {
		return noise.FormatValue(noise.KindTime, v)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func writeTable(w io.Writer, m *noise.Measurement, markdown bool) error {
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
	for _, line := range tableSummary(m) {
		if markdown {
			b.WriteString("- " + line + "\n")
			continue
		}
		b.WriteString(wrap.Lines(line, wrap.Width, "", "  ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// tableSummary says, for each metric, the worst and the median CPU, and
// what a reader must know about the run.
func tableSummary(m *noise.Measurement) []string {
	var lines []string
	if m.Tool != noise.ToolCommand {
		s := noise.Summarize(m)
		for _, ms := range s.Metrics {
			lines = append(lines, fmt.Sprintf("%s: worst %s (CPU %d), median CPU %s", noise.MetricLabel(ms.Metric), noise.FormatMetric(ms.Kind, ms.Metric, ms.Worst), ms.WorstCPU, noise.FormatMetric(ms.Kind, ms.Metric, ms.Median)))
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
