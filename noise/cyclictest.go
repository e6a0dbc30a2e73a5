package noise

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var (
	// print_stat: "T:%2d (%5d) P:%2d I:%ld C:%7lu Min:%7ld Act:%5ld
	// Avg:%5ld Max:%8ld", Act and Avg %8ld with -N, then " SMI:%8ld" with
	// --smi. Act and Avg keep their padding so the unit can be checked.
	ctStatRe      = regexp.MustCompile(`^T:\s*(\d+) \(\s*\d+\) P:\s*\d+ I:\d+ C:\s*(\d+) Min:\s*(\d+) Act:( *\d+) Avg:( *\d+) Max:\s*(\d+)(?: SMI:\s*(\d+))?\s*$`)
	ctStatStartRe = regexp.MustCompile(`^T:\s*(\d+)`)
	ctSpikeRe     = regexp.MustCompile(`^T:\s*\d+ Spike:`)
	ctTrailerRe   = regexp.MustCompile(`^#\s*([^:]+):(.*)$`)
	ctBreakRe     = regexp.MustCompile(`^# Break (thread|value): (\d+)\s*$`)
)

// threadIndexWarning is added whenever CPU numbers are cyclictest's thread
// indices, so that nobody reads them as CPUs by mistake.
const threadIndexWarning = "cyclictest does not say which CPU each thread ran on: the CPU numbers are thread indices (T: N)"

// ParseCyclictest parses the output of cyclictest in its default unit, µs:
// the T: lines (with -q, or the last complete refresh of the live display),
// the -h/-H histogram block (preferred when both are present), or the
// --json file (told apart by the content; its resolution_in_ns decides the
// unit there). Text output does not name CPUs, so CPU numbers are then
// thread indices and a Warning says so; the JSON's "cpu" is used when the
// threads were pinned. A thread that recorded no sample is left out with a
// Warning. Errors are *ParseError. The caller should check that every CPU
// it asked for is present: output cut off exactly between two T: lines of
// a single -q block cannot be told from a smaller run.
func ParseCyclictest(out []byte) (*Measurement, error) {
	return parseCyclictest(out, time.Microsecond)
}

// ParseCyclictestNS is ParseCyclictest for cyclictest -N, whose text
// output is in ns. The T: lines' padding shows their unit, so each function
// refuses the other's T: lines; a histogram block carries no such clue.
func ParseCyclictestNS(out []byte) (*Measurement, error) {
	return parseCyclictest(out, time.Nanosecond)
}

func parseCyclictest(out []byte, unit time.Duration) (*Measurement, error) {
	o := newRTOutput(ToolCyclictest, out)
	if err := o.usable(); err != nil {
		return nil, err
	}
	if o.isJSON() {
		return parseRTJSON(o, ToolCyclictest, cyclictestJSONLatency)
	}
	if err := checkUnit(o, unit); err != nil {
		return nil, err
	}
	m := &Measurement{Tool: ToolCyclictest}
	hist := 0
	for i, line := range o.lines {
		if strings.TrimSpace(line) != "# Histogram" {
			continue
		}
		if hist != 0 {
			return nil, o.errorf(i+1, "a second histogram block (the first starts at line %d)", hist)
		}
		hist = i + 1
	}
	var err error
	if hist != 0 {
		err = parseCyclictestHist(o, m, hist, unit)
	} else {
		err = parseCyclictestStats(o, m, unit)
	}
	if err != nil {
		return nil, err
	}
	noteBreak(o, m)
	return m, nil
}

// noteBreak records a -b breaktrace stop: cyclictest still prints its
// results, but they cover less than the duration asked for.
func noteBreak(o *rtOutput, m *Measurement) {
	var thread, value string
	for _, line := range o.lines {
		if b := ctBreakRe.FindStringSubmatch(line); b != nil && b[1] == "thread" {
			thread = b[2]
		} else if b != nil {
			value = b[2]
		}
	}
	if thread != "" {
		m.StopHit = true
		m.Warnings = append(m.Warnings, fmt.Sprintf("cyclictest stopped early: thread %s went over its -b break threshold (break value %s)", thread, value))
	}
}

// ctStat is one T: line.
type ctStat struct {
	line   int
	thread int
	lat    Latency
	smi    Count
}

// parseCyclictestStats reads the T: lines. The live display repeats them
// after a cursor-up escape, which outputLines removed, so they come as
// blocks of threads 0..n-1; the last complete block is the final result.
func parseCyclictestStats(o *rtOutput, m *Measurement, unit time.Duration) error {
	var blocks [][]ctStat
	cut := 0 // line of a T: line cut off at the end of the output
	lastLine := o.lastNonBlank()
	for i, line := range o.lines {
		n := i + 1
		if !strings.HasPrefix(line, "T:") || ctSpikeRe.MatchString(line) {
			continue
		}
		if n == lastLine && !ctStatRe.MatchString(line) {
			cut = n
			break
		}
		st, err := parseCtStat(o, n, line, unit)
		if err != nil {
			return err
		}
		if st.thread == 0 || len(blocks) == 0 {
			blocks = append(blocks, nil)
		}
		b := &blocks[len(blocks)-1]
		if st.thread != len(*b) {
			return o.errorf(n, "T: line of thread %d where thread %d belongs", st.thread, len(*b))
		}
		*b = append(*b, st)
	}
	if len(blocks) == 0 && cut != 0 {
		return o.errorf(cut, "the output ends inside the only T: line (truncated)")
	}
	if len(blocks) == 0 {
		return noResults(o)
	}
	block, err := finalBlock(o, m, blocks, cut)
	if err != nil {
		return err
	}
	m.Warnings = append(m.Warnings, threadIndexWarning)
	for _, st := range block {
		if st.lat.Samples == 0 {
			m.Warnings = append(m.Warnings, fmt.Sprintf("thread %d recorded no samples (C: 0)", st.thread))
			continue
		}
		if st.smi > 0 {
			m.Warnings = append(m.Warnings, fmt.Sprintf("thread %d saw %d SMIs: firmware noise no kernel causes", st.thread, st.smi))
		}
		lat := st.lat
		if err := checkOrder(o, st.line, fmt.Sprintf("thread %d", st.thread), &lat); err != nil {
			return err
		}
		m.CPUs = append(m.CPUs, CPU{CPU: st.thread, Latency: &lat})
	}
	if len(m.CPUs) == 0 {
		return o.errorf(block[0].line, "no thread recorded samples")
	}
	return nil
}

// noResults explains output without T: lines or a histogram block.
func noResults(o *rtOutput) error {
	for i, line := range o.lines {
		if strings.Contains(line, "Histogram Overflows:") || strings.Contains(line, "Max Latencies:") {
			return o.errorf(i+1, "histogram trailer without the # Histogram line that starts its block (truncated?)")
		}
	}
	return o.errorf(0, "no cyclictest results: neither T: lines nor a # Histogram block (verbose -v output is not supported)")
}

// finalBlock picks the last block that has every thread. When the output
// was cut off inside the last block, an earlier refresh is the best there
// is, and a Warning says so.
func finalBlock(o *rtOutput, m *Measurement, blocks [][]ctStat, cut int) ([]ctStat, error) {
	threads := 0
	for _, b := range blocks {
		threads = max(threads, len(b))
	}
	last := blocks[len(blocks)-1]
	// A cut line that starts a new block leaves the last one whole.
	cutInside := false
	if cut != 0 {
		s := ctStatStartRe.FindStringSubmatch(o.lines[cut-1])
		cutInside = s == nil || s[1] != "0"
	}
	if len(last) == threads && !cutInside {
		return last, nil
	}
	for i := len(blocks) - 2; i >= 0; i-- {
		if len(blocks[i]) == threads {
			m.Warnings = append(m.Warnings, fmt.Sprintf("the last T: lines (from line %d) are cut off; using the complete refresh at line %d", last[0].line, blocks[i][0].line))
			return blocks[i], nil
		}
	}
	at := last[len(last)-1].line
	if cut != 0 {
		at = cut
	}
	return nil, o.errorf(at, "the output ends inside the T: lines and holds no complete set of threads (truncated)")
}

// checkUnit refuses T: lines padded for the other unit: print_stat pads
// Act and Avg to 5 columns in µs and to 8 with -N. The T: lines of a live
// display also reveal the unit of the histogram block that follows them.
func checkUnit(o *rtOutput, unit time.Duration) error {
	for i, line := range o.lines {
		f := ctStatRe.FindStringSubmatch(line)
		if f == nil {
			continue
		}
		for _, field := range f[4:6] {
			if unit == time.Microsecond && len(field) == 8 && field[0] == ' ' {
				return o.errorf(i+1, "the T: line is padded like cyclictest -N output (ns): parse it with ParseCyclictestNS")
			}
			if unit == time.Nanosecond && len(field) < 8 {
				return o.errorf(i+1, "the T: line is padded like cyclictest output in µs, not -N (ns): parse it with ParseCyclictest")
			}
		}
	}
	return nil
}

// parseCtStat parses one T: line.
func parseCtStat(o *rtOutput, n int, line string, unit time.Duration) (ctStat, error) {
	f := ctStatRe.FindStringSubmatch(line)
	if f == nil {
		return ctStat{}, o.errorf(n, "malformed T: line")
	}
	st := ctStat{line: n}
	var err error
	if st.thread, err = strconv.Atoi(f[1]); err != nil || st.thread > maxCPU {
		return ctStat{}, o.errorf(n, "thread %s is not a thread index", f[1])
	}
	if st.lat.Samples, err = count(f[2]); err != nil {
		return ctStat{}, o.errorf(n, "C: %s: %v", f[2], err)
	}
	for _, v := range []struct {
		name, s string
		dst     *time.Duration
	}{{"Min", f[3], &st.lat.Min}, {"Avg", strings.TrimSpace(f[5]), &st.lat.Avg}, {"Max", f[6], &st.lat.Max}} {
		if *v.dst, err = scaled(v.s, unit); err != nil {
			return ctStat{}, o.errorf(n, "%s: %s: %v", v.name, v.s, err)
		}
	}
	if f[7] != "" {
		if st.smi, err = count(f[7]); err != nil {
			return ctStat{}, o.errorf(n, "SMI: %s: %v", f[7], err)
		}
	}
	return st, nil
}

// checkOrder refuses Min > Avg or Avg > Max: cyclictest's integer average
// of whole-unit samples always lies between them.
func checkOrder(o *rtOutput, n int, who string, l *Latency) error {
	if l.Min > l.Avg || l.Avg > l.Max {
		return o.errorf(n, "%s: min %v, avg %v and max %v are out of order", who, l.Min, l.Avg, l.Max)
	}
	return nil
}

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

// cyclictestJSONLatency reads one thread; nil means no samples. The JSON
// has no overflow count, so Overflow stays zero: the samples beyond the
// histogram are those of Samples that no bucket holds.
func cyclictestJSONLatency(t jsonThread, unit time.Duration) (*Latency, time.Duration, error) {
	s, _, err := t.value("cycles")
	if err != nil {
		return nil, 0, err
	}
	cycles, err := count(s)
	if err != nil {
		return nil, 0, t.errorf("cycles", "cycles %q is not a number kbisect can hold", s)
	}
	hist, _, err := t.histogram(unit)
	if err != nil {
		return nil, 0, err
	}
	if _, nan, err := t.value("avg"); err != nil || cycles == 0 {
		return nil, 0, err
	} else if nan {
		return nil, 0, t.errorf("avg", "avg is nan after %d cycles", cycles)
	}
	l := &Latency{Samples: cycles, Histogram: hist}
	if l.Min, err = t.latency("min", unit); err != nil {
		return nil, 0, err
	}
	if l.Avg, err = t.latency("avg", unit); err != nil {
		return nil, 0, err
	}
	if l.Max, err = t.latency("max", unit); err != nil {
		return nil, 0, err
	}
	if l.Min > l.Avg || l.Avg > l.Max {
		return nil, 0, t.errorf("max", "min %v, avg %v and max %v are out of order", l.Min, l.Avg, l.Max)
	}
	return l, 0, nil
}
