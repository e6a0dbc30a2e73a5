package noise

import (
	"fmt"
	"strings"
	"time"
)

// ctRow is one histogram row: the bucket and its count per column.
type ctRow struct {
	line   int
	upper  time.Duration
	counts []Count
}

// ctTrailer is one "# Label: v v v" line after the rows.
type ctTrailer struct {
	line int
	vals []string
}

// ctTrailerKeys maps the trailer labels kbisect reads to their keys; the
// old "Latencys" spelling predates rt-tests 0.74 (2011).
var ctTrailerKeys = map[string]string{
	"Total":               "Total",
	"Min Latencies":       "Min",
	"Min Latencys":        "Min",
	"Avg Latencies":       "Avg",
	"Avg Latencys":        "Avg",
	"Max Latencies":       "Max",
	"Max Latencys":        "Max",
	"Histogram Overflows": "Overflows",
}

// ctHist is the -h/-H block: one column per thread, plus an all-threads
// column with -H.
type ctHist struct {
	o        *rtOutput
	unit     time.Duration
	end      int // last line of the block
	rows     []ctRow
	trailers map[string]ctTrailer
}

// parseCyclictestHist reads the block that starts on line start.
func parseCyclictestHist(o *rtOutput, m *Measurement, start int, unit time.Duration) error {
	h := &ctHist{o: o, unit: unit, end: start, trailers: map[string]ctTrailer{}}
	if err := h.read(start + 1); err != nil {
		return err
	}
	threads, err := h.columns()
	if err != nil {
		return err
	}
	m.Warnings = append(m.Warnings, threadIndexWarning)
	for j := 0; j < threads; j++ {
		l, err := h.latency(j)
		if err != nil {
			return err
		}
		if l == nil {
			m.Warnings = append(m.Warnings, fmt.Sprintf("thread %d recorded no samples", j))
			continue
		}
		m.CPUs = append(m.CPUs, CPU{CPU: j, Latency: l})
	}
	if len(m.CPUs) == 0 {
		return o.errorf(start, "no thread recorded samples")
	}
	return nil
}

// read collects the rows, then the "#" trailer lines, up to the blank line
// that ends the block.
func (h *ctHist) read(from int) error {
	inTrailer := false
	for n := from; n <= len(h.o.lines); n++ {
		line := h.o.lines[n-1]
		switch {
		case strings.TrimSpace(line) == "":
			return nil
		case line[0] >= '0' && line[0] <= '9':
			if inTrailer {
				return h.o.errorf(n, "histogram row after the trailer")
			}
			if err := h.row(n, line); err != nil {
				return err
			}
		case line[0] == '#':
			inTrailer = true
			if err := h.trailer(n, line); err != nil {
				return err
			}
		default:
			return h.o.errorf(n, "unexpected line inside the histogram block")
		}
		h.end = n
	}
	return nil
}

func (h *ctHist) row(n int, line string) error {
	f := strings.Fields(line)
	b, err := scaled(f[0], h.unit)
	if err != nil {
		return h.o.errorf(n, "bucket %s: %v", f[0], err)
	}
	if k := len(h.rows); k > 0 && b <= h.rows[k-1].upper {
		return h.o.errorf(n, "bucket %s does not follow bucket %v", f[0], h.rows[k-1].upper)
	}
	if len(f) < 2 {
		return h.o.errorf(n, "histogram row without counts (truncated?)")
	}
	r := ctRow{line: n, upper: b}
	for _, s := range f[1:] {
		c, err := count(s)
		if err != nil {
			return h.o.errorf(n, "count %q: %v", s, err)
		}
		r.counts = append(r.counts, c)
	}
	if k := len(h.rows); k > 0 && len(r.counts) != len(h.rows[0].counts) {
		return h.o.errorf(n, "%d counts where line %d has %d (truncated row?)", len(r.counts), h.rows[0].line, len(h.rows[0].counts))
	}
	h.rows = append(h.rows, r)
	return nil
}

func (h *ctHist) trailer(n int, line string) error {
	t := ctTrailerRe.FindStringSubmatch(line)
	if t == nil {
		return nil
	}
	key, known := ctTrailerKeys[strings.TrimSpace(t[1])]
	if !known {
		return nil // overflow cycle numbers, SMIs, thread ids
	}
	if prev, dup := h.trailers[key]; dup {
		return h.o.errorf(n, "a second %s line (the first is line %d)", strings.TrimSpace(t[1]), prev.line)
	}
	h.trailers[key] = ctTrailer{line: n, vals: strings.Fields(t[2])}
	return nil
}

// columns checks the column counts and the -H all-threads columns and
// returns the number of threads, which the Min and Avg lines give: they
// never carry an all-threads column.
func (h *ctHist) columns() (int, error) {
	for _, k := range []string{"Min", "Avg", "Max", "Overflows"} {
		if _, ok := h.trailers[k]; !ok {
			return 0, h.o.errorf(h.end, "the histogram block ends without its %s line (truncated?)", trailerLabel(k))
		}
	}
	threads := len(h.trailers["Min"].vals)
	if threads == 0 || threads > maxCPU {
		return 0, h.o.errorf(h.trailers["Min"].line, "%d threads", threads)
	}
	if a := h.trailers["Avg"]; len(a.vals) != threads {
		return 0, h.o.errorf(a.line, "%d values where # Min Latencies: has %d", len(a.vals), threads)
	}
	// Rows carry the sum column with -H; 2.7+ prints it even for one thread.
	sumColumn := len(h.rows) > 0 && len(h.rows[0].counts) == threads+1
	if len(h.rows) > 0 && !sumColumn && len(h.rows[0].counts) != threads {
		return 0, h.o.errorf(h.rows[0].line, "%d counts for %d threads", len(h.rows[0].counts), threads)
	}
	// The trailers carry an all-threads column with -H and several threads.
	all := threads > 1 && (sumColumn || len(h.rows) == 0 && len(h.trailers["Max"].vals) == threads+1)
	want := threads
	if all {
		want++
	}
	for _, k := range []string{"Total", "Max", "Overflows"} {
		if t, ok := h.trailers[k]; ok && len(t.vals) != want {
			return 0, h.o.errorf(t.line, "%d values for %d threads (expected %d)", len(t.vals), threads, want)
		}
	}
	if sumColumn {
		return threads, h.checkSums(threads)
	}
	return threads, nil
}

func trailerLabel(key string) string {
	if key == "Overflows" {
		return "# Histogram Overflows:"
	}
	return "# " + key + " Latencies:"
}

// checkSums verifies the -H sum column of the rows: a wrong sum means the
// columns did not line up.
func (h *ctHist) checkSums(threads int) error {
	for _, r := range h.rows {
		var sum Count
		for _, c := range r.counts[:threads] {
			sum += c
		}
		if sum != r.counts[threads] {
			return h.o.errorf(r.line, "the all-threads count %d is not the sum %d of the threads", r.counts[threads], sum)
		}
	}
	return nil
}

// latency builds thread j's result; nil means it recorded no samples.
func (h *ctHist) latency(j int) (*Latency, error) {
	l := &Latency{}
	var last time.Duration // highest non-empty bucket
	for _, r := range h.rows {
		c := r.counts[j]
		if l.Samples+c < l.Samples {
			return nil, h.o.errorf(r.line, "the sample count of thread %d overflows", j)
		}
		l.Samples += c
		if c > 0 {
			last = r.upper
		}
		l.Histogram = append(l.Histogram, Bucket{Upper: r.upper, Count: c})
	}
	if t, ok := h.trailers["Total"]; ok {
		if total, err := count(t.vals[j]); err != nil || total != l.Samples {
			return nil, h.o.errorf(t.line, "thread %d: # Total: %s, but its buckets hold %d", j, t.vals[j], l.Samples)
		}
	}
	ovf := h.trailers["Overflows"]
	var err error
	if l.Overflow, err = count(ovf.vals[j]); err != nil || l.Samples+l.Overflow < l.Samples {
		return nil, h.o.errorf(ovf.line, "thread %d: overflow count %s is not a number kbisect can hold", j, ovf.vals[j])
	}
	// Every sample lands in a bucket or in the overflow count, so this is
	// the thread's cycle count.
	l.Samples += l.Overflow
	if l.Samples == 0 {
		return nil, nil
	}
	for _, f := range []struct {
		key string
		dst *time.Duration
	}{{"Min", &l.Min}, {"Avg", &l.Avg}, {"Max", &l.Max}} {
		t := h.trailers[f.key]
		if *f.dst, err = scaled(t.vals[j], h.unit); err != nil {
			return nil, h.o.errorf(t.line, "thread %d: %s: %v", j, t.vals[j], err)
		}
	}
	who := fmt.Sprintf("thread %d", j)
	if err := checkOrder(h.o, h.trailers["Max"].line, who, l); err != nil {
		return nil, err
	}
	// The true maximum is in the trailer (it may lie beyond the buckets),
	// but it cannot lie below a bucket that holds samples.
	if l.Max < last {
		return nil, h.o.errorf(h.trailers["Max"].line, "thread %d: max %v is below its non-empty bucket %v", j, l.Max, last)
	}
	return l, nil
}
