package noise

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file parses oslat (rt-tests) output. It also holds what oslat and
// cyclictest share: the line-numbered output (rtOutput) and the flattened
// --json file (jsonDoc); cyclictest.go holds the shared JSON thread loop.

var (
	oslatVersionRe = regexp.MustCompile(`^oslat V (\d+\.\d+)\s*$`)
	// oslat -T prints this on stderr and exits without a summary.
	oslatStopRe   = regexp.MustCompile(`Trace threshold \((\d+) us\) triggered on cpu (\d+) with (\d+(?:\.\d+)?) us!`)
	oslatBucketRe = regexp.MustCompile(`^(\d+(?:\.\d+)?) \(us\)$`)
	decimalRe     = regexp.MustCompile(`^\d+(?:\.\d+)?$`)
	// cyclictest computes avg as sum/cycles, so a thread that never ran
	// prints nan (glibc prints -nan for 0.0/0) where JSON needs a number.
	nanAvgRe = regexp.MustCompile(`("avg"\s*:\s*)-?nan\b`)
)

// ParseOslat parses the output of oslat, its text summary or its --json
// file (told apart by the content). Each CPU comes from the summary's Core:
// row or the JSON "cpu", never from the column. When oslat stopped on its
// -T trace threshold it prints no summary: ParseOslat then returns a
// Measurement with StopHit set and no CPUs together with a *ParseError that
// names the CPU and the latency. Every other error is a *ParseError too.
func ParseOslat(out []byte) (*Measurement, error) {
	o := newRTOutput(ToolOslat, out)
	if err := o.usable(); err != nil {
		return nil, err
	}
	if o.isJSON() {
		return parseRTJSON(o, ToolOslat, oslatJSONLatency)
	}
	return parseOslatText(o)
}

func parseOslatText(o *rtOutput) (*Measurement, error) {
	m := &Measurement{Tool: ToolOslat}
	var t *oslatTable
	var stop []string
	stopLine := 0
	for i, line := range o.lines {
		n := i + 1
		label, fields, isRow := oslatRow(line)
		if v := oslatVersionRe.FindStringSubmatch(line); v != nil {
			m.Version = v[1]
		}
		if s := oslatStopRe.FindStringSubmatch(line); s != nil && stop == nil {
			stop, stopLine = s, n
		}
		switch {
		case stop != nil:
			// No summary follows a stop; read on for the version line.
		case t == nil && isRow && label == "Core":
			var err error
			if t, err = newOslatTable(o, n, fields); err != nil {
				return nil, err
			}
		case t == nil && isRow && (oslatBucketRe.MatchString(label) || isOslatStat(label)):
			return nil, o.errorf(n, "oslat summary row before any Core: line (the start of the summary is missing)")
		case t == nil:
			// The preamble (settings, "Test starts...") says nothing we keep.
		case t.stage == oslatDone:
			if isRow && (label == "Core" || oslatBucketRe.MatchString(label) || isOslatStat(label)) {
				return nil, o.errorf(n, "a second oslat summary after the one that ended at line %d", t.end)
			}
		default:
			if err := t.add(n, line, label, fields, isRow); err != nil {
				return nil, err
			}
		}
	}
	if stop != nil {
		m.StopHit = true
		return m, o.errorf(stopLine, "oslat stopped early: its trace threshold (%s us) triggered on CPU %s with %s us, and after a stop oslat prints no summary", stop[1], stop[2], stop[3])
	}
	if t == nil {
		return nil, o.errorf(0, "no oslat summary: no Core: line in the output")
	}
	if t.stage != oslatDone {
		return nil, o.errorf(len(o.lines), "the output ends inside the oslat summary, before its %s line (truncated?)", t.want())
	}
	return t.measurement(m)
}

// oslatRow splits a summary row ("     Maximum:\t 507 (us)") into its label
// and the values after the colon. The values follow a TAB then a space;
// any blanks are accepted so a copy with expanded tabs still parses.
func oslatRow(line string) (label string, fields []string, ok bool) {
	i := strings.IndexByte(line, ':')
	if i < 0 {
		return "", nil, false
	}
	return strings.TrimSpace(line[:i]), strings.Fields(line[i+1:]), true
}

// oslatStats are the rows after the histogram, in the order oslat prints
// them, with the unit it appends.
var oslatStats = []struct{ label, unit string }{
	{"Minimum", "(us)"},
	{"Average", "(us)"},
	{"Maximum", "(us)"},
	{"Max-Min", "(us)"},
	{"Duration", "(sec)"},
}

func isOslatStat(label string) bool {
	return slices.ContainsFunc(oslatStats, func(s struct{ label, unit string }) bool { return s.label == label })
}

type oslatStage int

const (
	oslatFreq    oslatStage = iota // the Counter Freq (CPU Freq ≤ 2.2) row
	oslatBuckets                   // bucket rows up to "(including overflows)"
	oslatStat                      // oslatStats[next]
	oslatDone
)

// oslatTable collects the summary, one column per CPU.
type oslatTable struct {
	o     *rtOutput
	stage oslatStage
	next  int // index into oslatStats
	end   int // line of the Duration row
	cpus  []int
	lat   []Latency
	dur   []time.Duration
}

func newOslatTable(o *rtOutput, n int, fields []string) (*oslatTable, error) {
	if len(fields) == 0 {
		return nil, o.errorf(n, "the Core: row names no CPU")
	}
	t := &oslatTable{o: o, lat: make([]Latency, len(fields)), dur: make([]time.Duration, len(fields))}
	seen := map[int]bool{}
	for _, f := range fields {
		cpu, err := strconv.Atoi(f)
		if err != nil || cpu < 0 || cpu > maxCPU {
			return nil, o.errorf(n, "CPU %q is not a CPU number", f)
		}
		if seen[cpu] {
			return nil, o.errorf(n, "CPU %d is listed twice", cpu)
		}
		seen[cpu] = true
		t.cpus = append(t.cpus, cpu)
	}
	return t, nil
}

// want names the row the table expects next.
func (t *oslatTable) want() string {
	switch t.stage {
	case oslatFreq:
		return "Counter Freq:"
	case oslatBuckets:
		return "last histogram bucket (including overflows)"
	default:
		return oslatStats[t.next].label + ":"
	}
}

// values checks a row has one value per CPU once its unit is cut off.
func (t *oslatTable) values(n int, fields []string, units ...string) ([]string, error) {
	if len(fields) == 0 || !slices.Contains(units, fields[len(fields)-1]) {
		return nil, t.o.errorf(n, "the row does not end with %s (truncated?)", strings.Join(units, " or "))
	}
	if fields = fields[:len(fields)-1]; len(fields) != len(t.cpus) {
		return nil, t.o.errorf(n, "%d values for %d CPUs", len(fields), len(t.cpus))
	}
	return fields, nil
}

func (t *oslatTable) add(n int, line, label string, fields []string, isRow bool) error {
	switch {
	case !isRow && strings.TrimSpace(line) == "..." && t.stage == oslatBuckets:
		return nil // oslat -z stands for a run of all-zero buckets.
	case !isRow:
		return t.o.errorf(n, "unexpected line inside the oslat summary, where the %s line belongs", t.want())
	case label == "Core":
		return t.o.errorf(n, "a second Core: line inside the oslat summary")
	}
	switch t.stage {
	case oslatFreq:
		if label != "Counter Freq" && label != "CPU Freq" {
			return t.o.errorf(n, "expected the Counter Freq: row after Core:")
		}
		// 2.3 to 2.6 print "(Mhz)", 2.7 and later "(MHz)".
		_, err := t.values(n, fields, "(Mhz)", "(MHz)")
		t.stage = oslatBuckets
		return err
	case oslatBuckets:
		return t.bucket(n, label, fields)
	default:
		return t.stat(n, label, fields)
	}
}

// bucket adds one histogram row: its label is the bucket's upper bound in
// µs, "%03llu (us)" in 2.4 and "%03.*f (us)" since 2.5 (-W).
func (t *oslatTable) bucket(n int, label string, fields []string) error {
	b := oslatBucketRe.FindStringSubmatch(label)
	if b == nil {
		if isOslatStat(label) {
			return t.o.errorf(n, "the histogram has no last bucket marked (including overflows) (truncated?)")
		}
		return t.o.errorf(n, "expected a histogram bucket row (\"001 (us):\")")
	}
	upper, err := decimal(b[1], time.Microsecond)
	if err != nil {
		return t.o.errorf(n, "bucket label %s: %v", b[1], err)
	}
	if h := t.lat[0].Histogram; len(h) > 0 && upper <= h[len(h)-1].Upper {
		return t.o.errorf(n, "bucket %s us does not follow bucket %v", b[1], h[len(h)-1].Upper)
	}
	last := len(fields) >= 2 && fields[len(fields)-2] == "(including" && fields[len(fields)-1] == "overflows)"
	if last {
		fields = fields[:len(fields)-2]
		t.stage = oslatStat
	}
	if len(fields) != len(t.cpus) {
		return t.o.errorf(n, "%d counts for %d CPUs (truncated row?)", len(fields), len(t.cpus))
	}
	for j, f := range fields {
		c, err := count(f)
		if err != nil {
			return t.o.errorf(n, "count %q: %v", f, err)
		}
		l := &t.lat[j]
		if l.Samples+c < l.Samples {
			return t.o.errorf(n, "the sample count of CPU %d overflows", t.cpus[j])
		}
		l.Samples += c
		// The last bucket also holds every larger sample. Overflow stays
		// zero: oslat does not say how many there were, and Max still has
		// the true maximum.
		l.Histogram = append(l.Histogram, Bucket{Upper: upper, Count: c})
	}
	return nil
}

// stat parses the rows after the histogram, in their fixed order.
func (t *oslatTable) stat(n int, label string, fields []string) error {
	s := oslatStats[t.next]
	if label != s.label {
		return t.o.errorf(n, "expected the %s: row", s.label)
	}
	vals, err := t.values(n, fields, s.unit)
	if err != nil {
		return err
	}
	for j, v := range vals {
		unit := time.Microsecond
		if s.label == "Duration" {
			unit = time.Second
		}
		d, err := decimal(v, unit)
		if err != nil {
			return t.o.errorf(n, "%s %q: %v", s.label, v, err)
		}
		l := &t.lat[j]
		switch s.label {
		case "Minimum":
			l.Min = d
		case "Average":
			l.Avg = d
		case "Maximum":
			if d < l.Min {
				return t.o.errorf(n, "Maximum %v of CPU %d is below its Minimum %v", d, t.cpus[j], l.Min)
			}
			l.Max = d
		case "Max-Min":
			// A cheap check that the columns lined up.
			if d != l.Max-l.Min {
				return t.o.errorf(n, "Max-Min of CPU %d is %v but Maximum - Minimum is %v", t.cpus[j], d, l.Max-l.Min)
			}
		case "Duration":
			t.dur[j] = d
		}
	}
	t.next++
	if t.next == len(oslatStats) {
		t.stage, t.end = oslatDone, n
	}
	return nil
}

func (t *oslatTable) measurement(m *Measurement) (*Measurement, error) {
	for j, cpu := range t.cpus {
		l := t.lat[j]
		if l.Samples == 0 {
			// A maximum without a sample in the histogram: not a run
			// oslat could have printed.
			return nil, t.o.errorf(t.end, "CPU %d has a Maximum of %v but no sample in the histogram", cpu, l.Max)
		}
		if w := settleOslatAverage(cpu, &l); w != "" {
			m.Warnings = append(m.Warnings, w)
		}
		m.CPUs = append(m.CPUs, CPU{CPU: cpu, Latency: &l})
		// The threads start together and stop on the same alarm; the
		// longest one is how long the measurement ran.
		m.Duration = max(m.Duration, t.dur[j])
	}
	m.sortCPUs()
	return m, nil
}

// settleOslatAverage keeps Avg within [Min, Max]. oslat does not average
// the samples: it averages the buckets' upper bounds (and 2.4 adds thread
// 0's overflow excess to every thread), so its average can sit above the
// maximum when almost every sample is in the first bucket. Say so instead
// of failing a real run; the warning is "" when Avg is in range.
func settleOslatAverage(cpu int, l *Latency) string {
	clamped := min(max(l.Avg, l.Min), l.Max)
	if clamped == l.Avg {
		return ""
	}
	w := fmt.Sprintf("CPU %d: oslat's average %v lies outside [%v, %v] (it averages bucket bounds); using %v", cpu, l.Avg, l.Min, l.Max, clamped)
	l.Avg = clamped
	return w
}

// decimal converts a non-negative decimal number in unit ("507", "1.002").
// It refuses the exponents and "inf" strconv would accept.
func decimal(s string, unit time.Duration) (time.Duration, error) {
	if !decimalRe.MatchString(s) {
		return 0, errNumber
	}
	if !strings.Contains(s, ".") {
		return scaled(s, unit)
	}
	return scaledFloat(s, unit)
}

// oslatJSONLatency reads one thread; a nil Latency means no samples.
func oslatJSONLatency(t jsonThread, _ time.Duration) (*Latency, time.Duration, error) {
	dur, err := t.latency("duration", time.Second)
	if err != nil {
		return nil, 0, err
	}
	hist, samples, err := t.histogram(time.Microsecond)
	if err != nil {
		return nil, 0, err
	}
	avg, nan, err := t.value("avg")
	switch {
	case err != nil:
		return nil, 0, err
	case nan && samples > 0:
		return nil, 0, t.errorf("avg", "avg is nan but the histogram holds %d samples", samples)
	case nan:
		return nil, dur, nil
	case samples == 0:
		return nil, 0, t.errorf("histogram", "the histogram holds no samples but avg is %s", avg)
	}
	// Since 2.5, -W widths that are not whole µs make oslat print bucket
	// labels with 3 decimals, and then min and max in its raw unit, ns.
	unit := time.Microsecond
	if keys := t.d.keys[t.path+".histogram"]; strings.Contains(strings.Join(keys, ""), ".") {
		unit = time.Nanosecond
	}
	l := &Latency{Samples: samples, Histogram: hist}
	if l.Min, err = t.latency("min", unit); err != nil {
		return nil, 0, err
	}
	if l.Avg, err = t.latency("avg", time.Microsecond); err != nil {
		return nil, 0, err
	}
	if l.Max, err = t.latency("max", unit); err != nil {
		return nil, 0, err
	}
	if l.Min > l.Max {
		return nil, 0, t.errorf("max", "max %v is below min %v", l.Max, l.Min)
	}
	return l, dur, nil
}
