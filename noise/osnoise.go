package noise

import (
	"fmt"
	"math/bits"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The osnoise tracer prints one summary line per CPU and period (kernel
// trace_osnoise_print, unchanged since 5.14); only the prefix varies: 4, 5
// or 7 latency flags or none, a "(tgid)" column or not, a timestamp with or
// without a dot. The CPU comes from "[NNN]", never from the task name.
var osnoiseLine = regexp.MustCompile(`^\s*(.+?)-(\d+)\s+(?:\(\s*[\d-]+\)\s+)?\[(\d+)\]\s+(?:[.a-zA-Z0-9]{4,8}\s+)?\d+(?:\.\d+)?:\s+` +
	`(\d+)\s+(\d+)\s+(\d+\.\d{5})\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$`)

// traceEvent is any other event line of the same buffer ("irq_noise:",
// "sample_threshold:", a trace_printk): kept out of the summary.
var traceEvent = regexp.MustCompile(`^\s*.+-\d+\s+(?:\(\s*[\d-]+\)\s+)?\[\d+\]\s+(?:[.a-zA-Z0-9]{4,8}\s+)?\d+(?:\.\d+)?:\s+[\w.]+:`)

// The first seed's table: a reduction of the same per-period line with HW
// dropped and two labels swapped (its "MAX_NOISE" values are the period's
// total noise, its "NOISE" values the longest single one). Read by
// position.
var (
	seedHeader = regexp.MustCompile(`(?i)^\s*CPU\s+RUNTIME\s+MAX_NOISE\s+AVAIL%\s+NOISE\s+NMI\s+IRQ\s+SIRQ\s+THREAD\s*$`)
	seedRow    = regexp.MustCompile(`^\s*\[(\d+)\]\s+(\d+)\s+(\d+)\s+(\d+\.\d+)%\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$`)
	// sampleThreshold is the event of one noise above tracing_thresh.
	sampleThreshold = regexp.MustCompile(`\[(\d+)\].*\ssample_threshold: start \d+\.\d+ duration (\d+) ns interferences? \d+\s*$`)
	lostEvents      = regexp.MustCompile(`^\s*CPU:\s*(\d+)\s+\[LOST (\d+) EVENTS\]`)
)

// Period is one osnoise summary line: one CPU's account of one period.
// ParseOsnoise sums them per CPU.
type Period struct {
	CPU       int
	Runtime   time.Duration
	Noise     time.Duration
	Available Percent // as printed: truncated to 5 decimals
	MaxSingle time.Duration
	HW        Count
	NMI       Count
	IRQ       Count
	SIRQ      Count
	Thread    Count
	// HWKnown is false for the seed layout, which drops the HW column.
	HWKnown bool
}

// ParseOsnoise reads the osnoise tracer's trace output (the trace file of
// tracefs), or the first seed's per-CPU table, into one result per CPU
// summed over its periods.
//
// A trace with only the osnoise events (no summary lines, e.g. the first
// lines of a longer trace) still tells every single noise above the
// threshold: its sample_threshold events become each CPU's distribution
// of single noises, as rtla osnoise hist makes it, with a warning.
func ParseOsnoise(out []byte) (*Measurement, error) {
	periods, singles, m, err := parseOsnoise(out)
	if err != nil {
		return nil, err
	}
	if len(periods) == 0 {
		return singleNoises(m, singles)
	}
	for _, p := range periods {
		m.cpu(p.CPU).addPeriod(p)
	}
	for i := range m.CPUs {
		o := m.CPUs[i].Osnoise
		o.Available = availability(o.Runtime, o.Noise)
	}
	m.sortCPUs()
	return m, nil
}

var errNoSummary = &ParseError{Tool: ToolOsnoise, Msg: "no per-period summary lines: was the osnoise tracer running, with its workload on (osnoise/options OSNOISE_WORKLOAD)?"}

// parseOsnoise reads the summary lines and the single noises of the
// sample_threshold events.
func parseOsnoise(out []byte) ([]Period, map[int][]time.Duration, *Measurement, error) {
	m := &Measurement{Tool: ToolOsnoise}
	singles := map[int][]time.Duration{}
	lines := outputLines(out)
	fail := func(n int, format string, args ...any) error {
		return &ParseError{Tool: ToolOsnoise, Line: n + 1, Text: lines[n], Msg: fmt.Sprintf(format, args...)}
	}
	var periods []Period
	seedLayout := false
	for n, line := range lines {
		text := strings.TrimSpace(line)
		switch {
		case text == "" || isStackLine(text):
		case strings.HasPrefix(text, "#"):
			if strings.HasPrefix(text, "# tracer:") && !strings.HasSuffix(text, " osnoise") {
				return nil, nil, nil, fail(n, "this is the %s tracer's output, not osnoise's", strings.TrimSpace(strings.TrimPrefix(text, "# tracer:")))
			}
			if text == "# osnoise is tainted!" {
				m.Tainted = true
				m.Warnings = appendOnce(m.Warnings, "osnoise is tainted: the kernel found its own noise accounting inconsistent, so this run is not evidence")
			}
		case seedHeader.MatchString(line):
			seedLayout = true
		case strings.Contains(text, "stop tracing hit on cpu"):
			m.StopHit = true
		case lostEvents.MatchString(line):
			mm := lostEvents.FindStringSubmatch(line)
			m.Warnings = append(m.Warnings, fmt.Sprintf("CPU %s lost %s events: the ring buffer overflowed", mm[1], mm[2]))
		default:
			p, ok, err := parseOsnoiseLine(line, seedLayout)
			switch {
			case err != nil:
				return nil, nil, nil, fail(n, "%v", err)
			case ok:
				periods = append(periods, p)
			case traceEvent.MatchString(line):
				if st := sampleThreshold.FindStringSubmatch(line); st != nil {
					cpu, err1 := strconv.Atoi(st[1])
					d, err2 := scaled(st[2], time.Nanosecond)
					if err1 != nil || err2 != nil || cpu > maxCPU {
						return nil, nil, nil, fail(n, "a sample_threshold event out of range")
					}
					singles[cpu] = append(singles[cpu], d)
				}
			default:
				return nil, nil, nil, fail(n, "not an osnoise summary line, event or comment")
			}
		}
	}
	if len(periods) == 0 && len(singles) == 0 {
		return nil, nil, nil, errNoSummary
	}
	return periods, singles, m, nil
}

// singleNoises makes a measurement of the single noises of each CPU.
func singleNoises(m *Measurement, singles map[int][]time.Duration) (*Measurement, error) {
	for cpu, ds := range singles {
		l := &Latency{Samples: Count(len(ds)), Min: ds[0]}
		var sum time.Duration
		for _, d := range ds {
			l.Min, l.Max = min(l.Min, d), max(l.Max, d)
			sum += d
		}
		l.Avg = sum / time.Duration(len(ds))
		c := m.cpu(cpu)
		c.Latency = l
		c.Osnoise = &Osnoise{MaxSingle: l.Max}
	}
	m.sortCPUs()
	m.Warnings = append(m.Warnings, "no per-period summary lines: only the single noises of the sample_threshold events are known (no runtime, availability or counters)")
	return m, nil
}

// parseOsnoiseLine reads one summary line of either layout; ok is false
// for a line of neither.
func parseOsnoiseLine(line string, seedLayout bool) (p Period, ok bool, err error) {
	var f []string // cpu, runtime, noise, avail, max single, hw, nmi, irq, sirq, thread
	if m := osnoiseLine.FindStringSubmatch(line); m != nil {
		f = m[3:]
		p.HWKnown = true
	} else if m := seedRow.FindStringSubmatch(line); m != nil && seedLayout {
		f = []string{m[1], m[2], m[3], m[4], m[5], "0", m[6], m[7], m[8], m[9]}
	} else {
		return p, false, nil
	}
	if p.CPU, err = strconv.Atoi(f[0]); err != nil || p.CPU > maxCPU {
		return p, false, fmt.Errorf("CPU %s is out of range", f[0])
	}
	durations := []*time.Duration{&p.Runtime, &p.Noise}
	for i, d := range durations {
		if *d, err = usec(f[1+i]); err != nil {
			return p, false, fmt.Errorf("%s: %v", f[1+i], err)
		}
	}
	if p.MaxSingle, err = usec(f[4]); err != nil {
		return p, false, fmt.Errorf("%s: %v", f[4], err)
	}
	avail, err := strconv.ParseFloat(f[3], 64)
	if err != nil || avail > 100 {
		return p, false, fmt.Errorf("availability %s is not a percentage", f[3])
	}
	p.Available = Percent(avail)
	for i, c := range []*Count{&p.HW, &p.NMI, &p.IRQ, &p.SIRQ, &p.Thread} {
		if *c, err = count(f[5+i]); err != nil {
			return p, false, fmt.Errorf("%s: %v", f[5+i], err)
		}
	}
	switch {
	case p.Runtime <= 0:
		return p, false, fmt.Errorf("a period with no runtime")
	case p.Noise > p.Runtime:
		return p, false, fmt.Errorf("noise %s is more than the runtime %s", p.Noise, p.Runtime)
	case p.MaxSingle > p.Noise:
		// The kernel counts the longest single noise into the total, so
		// it cannot be larger: the columns are not osnoise's.
		return p, false, fmt.Errorf("max single noise %s is more than the period's noise %s", p.MaxSingle, p.Noise)
	}
	// The printed availability is (runtime − noise) / runtime truncated:
	// when it disagrees, the columns did not line up.
	if want := truncatedAvailability(p.Runtime, p.Noise, decimals(f[3])); want != f[3] {
		return p, false, fmt.Errorf("availability %s%% does not match runtime %s and noise %s (%s%%)", f[3], p.Runtime, p.Noise, want)
	}
	return p, true, nil
}

func decimals(s string) int {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return len(s) - i - 1
	}
	return 0
}

// truncatedAvailability writes (runtime − noise) / runtime in percent,
// truncated to dec decimals, from the whole microseconds the kernel
// prints, as the kernel computes it.
func truncatedAvailability(runtime, noise time.Duration, dec int) string {
	r, n := uint64(runtime/time.Microsecond), uint64(noise/time.Microsecond)
	scale := uint64(100)
	for i := 0; i < dec; i++ {
		scale *= 10
	}
	hi, lo := bits.Mul64(r-n, scale)
	if hi >= r {
		return "" // cannot happen for r−n ≤ r and dec ≤ 17; never matches
	}
	q, _ := bits.Div64(hi, lo, r)
	digits := strconv.FormatUint(q, 10)
	if dec == 0 {
		return digits
	}
	for len(digits) <= dec {
		digits = "0" + digits
	}
	return digits[:len(digits)-dec] + "." + digits[len(digits)-dec:]
}

// addPeriod adds one period to a CPU's account.
func (c *CPU) addPeriod(p Period) {
	if c.Osnoise == nil {
		c.Osnoise = &Osnoise{MinAvailable: 100}
	}
	o := c.Osnoise
	o.Periods++
	o.Runtime += p.Runtime
	o.Noise += p.Noise
	o.MaxNoise = max(o.MaxNoise, p.Noise)
	o.MaxSingle = max(o.MaxSingle, p.MaxSingle)
	o.MinAvailable = min(o.MinAvailable, p.Available)
	o.HW += p.HW
	o.NoHW = o.NoHW || !p.HWKnown
	o.NMI += p.NMI
	o.IRQ += p.IRQ
	o.SIRQ += p.SIRQ
	o.Thread += p.Thread
}

// availability is the share of runtime left, truncated to 5 decimals as
// the kernel and rtla print it.
func availability(runtime, noise time.Duration) Percent {
	if runtime <= 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(truncatedAvailability(runtime, noise, 5), 64)
	return Percent(v)
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
