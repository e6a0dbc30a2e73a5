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
