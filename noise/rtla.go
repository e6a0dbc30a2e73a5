package noise

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseRtlaOsnoise reads what rtla osnoise top, rtla osnoise hist or rtla
// hwnoise printed, telling the layouts apart by their content; anything
// but one complete table (rtla's errors and help, a cut or garbled table)
// is a *ParseError.
func ParseRtlaOsnoise(out []byte) (*Measurement, error) {
	return parseRtla(ToolRtlaOsnoise, out, parseRtlaOsnoiseHist, parseRtlaOsnoiseTop)
}

// ParseRtlaTimerlat reads what rtla timerlat top or rtla timerlat hist
// printed, or the timerlat tracer's own trace file, telling them apart by
// their content; anything but one complete table is a *ParseError.
func ParseRtlaTimerlat(out []byte) (*Measurement, error) {
	if isTimerlatTrace(out) {
		return parseTimerlatTrace(out)
	}
	return parseRtla(ToolRtlaTimerlat, out, parseRtlaTimerlatHist, parseRtlaTimerlatTop)
}

// parseRtla reads the output of an rtla tool with the parser of the
// layout it holds, a histogram or a top table.
func parseRtla(tool string, out []byte, hist, top func(*rtlaOutput) (*Measurement, error)) (*Measurement, error) {
	o, isHist, err := readRtla(tool, out)
	if err != nil {
		return nil, err
	}
	if isHist {
		return hist(o)
	}
	return top(o)
}

// rtlaOutput is one rtla run's output. lines[i] is line i+1 of the original
// bytes: outputLines drops escapes and carriage returns, never lines.
type rtlaOutput struct {
	tool  string // ToolRtlaOsnoise or ToolRtlaTimerlat
	name  string // "osnoise" or "timerlat", as rtla names itself
	lines []string
	// end cuts the output at "hit stop tracing": what follows is the
	// auto-analysis and the trace file name, never table data.
	end int
	m   *Measurement
}

// tableReader is a table or a histogram read line by line (n counts from
// 1); f are the line's fields, never none.
type tableReader interface {
	line(n int, line string, f []string) error
	finish() (*Measurement, error)
}

// read feeds the output up to its end to a table reader, but for the
// lines that carry no data: blank ones, and those note keeps.
func (o *rtlaOutput) read(t tableReader) (*Measurement, error) {
	for i, line := range o.lines[:o.end] {
		f := strings.Fields(line)
		if len(f) == 0 || o.note(line) {
			continue
		}
		if err := t.line(i+1, line, f); err != nil {
			return nil, err
		}
	}
	return t.finish()
}

// rtlaTop is what the top tables of rtla osnoise and rtla timerlat share:
// without -q, rtla reprints the whole table every second, and the last
// one holds the final results.
type rtlaTop struct {
	o      *rtlaOutput
	header int         // line of the column header of the current table
	seen   map[int]int // CPU → its line in the current table
	most   int         // the most rows an earlier table had
}

// newTable forgets the rows of the table before, keeping its length: a
// later table with fewer rows is one cut short.
func (t *rtlaTop) newTable() {
	t.most = max(t.most, len(t.o.m.CPUs))
	t.o.m.CPUs, t.o.m.Warnings = nil, nil
	t.header, t.seen = 0, nil
}

// columnHeader starts the rows of the current table at line n.
func (t *rtlaTop) columnHeader(n int) error {
	if t.header != 0 {
		return t.o.errorf(n, "a second column header in one table (first on line %d)", t.header)
	}
	t.header, t.seen = n, map[int]int{}
	return nil
}

// rowCPU reads the CPU number s that starts the row on line n; a CPU has
// one row in a table.
func (t *rtlaTop) rowCPU(n int, s string) (int, error) {
	cpu, err := rtlaCPU(s)
	if err != nil {
		return 0, t.o.errorf(n, "%s", rtlaNumberError("CPU", s, err))
	}
	if first, dup := t.seen[cpu]; dup {
		return 0, t.o.errorf(n, "CPU %d appears twice (first on line %d)", cpu, first)
	}
	return cpu, nil
}

// lastTable refuses output that does not end with a whole table.
func (t *rtlaTop) lastTable() error {
	m := t.o.m
	switch {
	case t.header == 0:
		return t.o.errorf(t.o.lastText(), "the output ends before the column header")
	case len(m.CPUs) == 0:
		return t.o.errorf(t.header, "the table has no CPU rows")
	case len(m.CPUs) < t.most:
		return t.o.errorf(t.o.lastText(), "the last table is shorter than an earlier one (%d CPUs, not %d): the output is cut short",
			len(m.CPUs), t.most)
	}
	return nil
}

// readRtla splits the output, refuses the outputs of a failed rtla, and
// says whether it holds a histogram (or else a top table).
func readRtla(tool string, out []byte) (*rtlaOutput, bool, error) {
	o := &rtlaOutput{
		tool:  tool,
		name:  strings.TrimPrefix(tool, "rtla-"),
		lines: outputLines(out),
		m:     &Measurement{Tool: tool},
	}
	o.end = len(o.lines)
	for i, line := range o.lines {
		if strings.Contains(line, "hit stop tracing") {
			o.end, o.m.StopHit = i, true
			break
		}
	}
	first := o.firstText()
	if first == 0 {
		return nil, false, o.errorf(0, "empty output")
	}
	for i, line := range o.lines[:o.end] {
		if msg, failed := rtlaFailure(line); failed {
			return nil, false, o.errorf(i+1, "%s", msg)
		}
	}
	for i, line := range o.lines[:o.end] {
		name, hist, ok := rtlaLayout(line)
		if !ok {
			continue
		}
		if name != "" && name != o.name {
			return nil, false, o.errorf(i+1, "this is rtla %s output, not rtla %s", name, o.name)
		}
		return o, hist, nil
	}
	return nil, false, o.errorf(first, "no rtla %s table or histogram in the output", o.name)
}

// rtlaFailure recognises what rtla prints instead of results when it
// fails or is asked for help; such output must never read as a measurement.
func rtlaFailure(line string) (string, bool) {
	t := strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(t, "Tracer ") && strings.HasSuffix(t, " not found!"):
		return "the kernel lacks the tracer rtla needs", true
	case strings.HasPrefix(t, "Failed to"), strings.HasPrefix(t, "Could not"),
		strings.HasPrefix(t, "Error "), strings.HasPrefix(t, "Invalid "),
		strings.Contains(t, "needs root permission"):
		return "rtla reported an error", true
	case strings.HasPrefix(t, "usage:"), strings.HasPrefix(t, "rtla version"),
		strings.HasPrefix(t, "rtla ") && strings.Contains(t, "(version "):
		return "rtla printed its help text, not a measurement", true
	}
	return "", false
}

// rtlaLayout recognises the first line of a top table or a histogram, and
// which tool printed it ("" for a histogram's Index header, whose columns
// tell).
func rtlaLayout(line string) (name string, hist, ok bool) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return "", false, false
	}
	switch s := strings.Join(f, " "); {
	case s == "Operating System Noise", s == "Hardware-related Noise", strings.HasPrefix(s, "CPU Period"):
		return "osnoise", false, true
	case s == "Timer Latency", strings.HasPrefix(s, "CPU COUNT"):
		return "timerlat", false, true
	case s == "# RTLA osnoise histogram":
		return "osnoise", true, true
	case s == "# RTLA timerlat histogram":
		return "timerlat", true, true
	case f[0] == "Index":
		return "", true, true
	}
	return "", false, false
}

// note consumes the lines rtla prints around its tables that carry no
// data, keeping the ones a reader should know about as warnings.
func (o *rtlaOutput) note(line string) bool {
	t := strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(strings.ToLower(t), "saving trace to"):
		return true
	case strings.Contains(t, "events missed"):
		o.m.Warnings = append(o.m.Warnings, t)
		return true
	}
	return false
}

func (o *rtlaOutput) errorf(line int, format string, args ...any) error {
	text := ""
	if line > 0 && line <= len(o.lines) {
		text = strings.TrimSpace(o.lines[line-1])
	}
	return &ParseError{Tool: o.tool, Line: line, Text: text, Msg: fmt.Sprintf(format, args...)}
}

func (o *rtlaOutput) warnf(format string, args ...any) {
	o.m.Warnings = append(o.m.Warnings, fmt.Sprintf(format, args...))
}

// firstText is the number of the first line that is not blank, 0 if none.
func (o *rtlaOutput) firstText() int {
	for i, line := range o.lines {
		if strings.TrimSpace(line) != "" {
			return i + 1
		}
	}
	return 0
}

// lastText is the number of the last line before the stop that is not
// blank: where a truncated output ends.
func (o *rtlaOutput) lastText() int {
	for i := o.end - 1; i >= 0; i-- {
		if strings.TrimSpace(o.lines[i]) != "" {
			return i + 1
		}
	}
	return 0
}

// rtlaKind is what one rtla column or block measures, and so where it goes
// in a CPU.
type rtlaKind int

const (
	rtlaIRQ    rtlaKind = iota // timerlat, seen by the timer IRQ
	rtlaThread                 // timerlat, seen by its kernel thread
	rtlaUser                   // timerlat, seen by a user-space thread (-u)
	rtlaSingle                 // osnoise hist: one single noise
)

func (k rtlaKind) String() string {
	switch k {
	case rtlaIRQ:
		return "IRQ"
	case rtlaThread:
		return "thread"
	case rtlaUser:
		return "user-thread"
	}
	return "noise"
}

// set stores l as c's result of kind k.
func (k rtlaKind) set(c *CPU, l *Latency) {
	switch k {
	case rtlaIRQ:
		c.IRQLatency = l
	case rtlaThread:
		c.Latency = l
	case rtlaUser:
		c.UserLatency = l
	case rtlaSingle:
		c.Latency = l
		// The histogram has every single noise, so its maximum is the
		// longest one; the per-period totals are not in this output.
		c.Osnoise = &Osnoise{MaxSingle: l.Max}
	}
}

// get returns c's result of kind k.
func (k rtlaKind) get(c *CPU) *Latency {
	switch k {
	case rtlaIRQ:
		return c.IRQLatency
	case rtlaUser:
		return c.UserLatency
	}
	return c.Latency
}

func rtlaDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// rtlaCPU reads a CPU number (rtla's %d, or the digits of CPU-%03d).
func rtlaCPU(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if !rtlaDigits(s) || err != nil || n > maxCPU {
		return 0, errNumber
	}
	return n, nil
}

// rtlaCount reads a count printed with %d or %llu.
func rtlaCount(s string) (Count, error) {
	if !rtlaDigits(s) {
		return 0, errNumber
	}
	return count(s)
}

// rtlaTime reads a whole number of unit printed with %llu.
func rtlaTime(s string, unit time.Duration) (time.Duration, error) {
	if !rtlaDigits(s) {
		return 0, errNumber
	}
	return scaled(s, unit)
}

// rtlaAvg reads an average: an integer (rtla 6.1, timerlat) or %.2f
// (osnoise hist since 6.3).
func rtlaAvg(s string, unit time.Duration) (time.Duration, error) {
	whole, frac, dot := strings.Cut(s, ".")
	if !rtlaDigits(whole) || dot && !rtlaDigits(frac) {
		return 0, errNumber
	}
	return scaledFloat(s, unit)
}

// rtlaDuration reads rtla's elapsed time, "%3d %02d:%02d:%02d": days, then
// hours, minutes and seconds (it prints gmtime of the elapsed seconds).
func rtlaDuration(s string) (time.Duration, error) {
	bad := errors.New(`not rtla's "days hh:mm:ss" elapsed time`)
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, bad
	}
	hms := strings.Split(f[1], ":")
	if len(hms) != 3 || len(f[0]) > 3 {
		return 0, bad
	}
	parts := []struct {
		s    string
		max  int
		unit time.Duration
	}{{f[0], 366, 24 * time.Hour}, {hms[0], 23, time.Hour}, {hms[1], 59, time.Minute}, {hms[2], 60, time.Second}}
	var d time.Duration
	for _, p := range parts {
		n, err := strconv.Atoi(p.s)
		if !rtlaDigits(p.s) || err != nil || n > p.max {
			return 0, bad
		}
		d += time.Duration(n) * p.unit
	}
	return d, nil
}

// rtlaNumberError says which value of a line could not be read.
func rtlaNumberError(what, s string, err error) string {
	return fmt.Sprintf("%s %q: %v", what, s, err)
}
