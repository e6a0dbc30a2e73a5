package noise

import (
	"strconv"
	"strings"
	"time"
)

// The column headers of rtla osnoise top and of rtla hwnoise, which stops
// at NMI because it runs with interrupts disabled.
const (
	rtlaOsnoiseTopHeader = "CPU Period Runtime Noise % CPU Aval Max Noise Max Single HW NMI IRQ Softirq Thread"
	rtlaHwnoiseTopHeader = "CPU Period Runtime Noise % CPU Aval Max Noise Max Single HW NMI"
)

// parseRtlaOsnoiseHist reads rtla osnoise hist: a histogram of the single
// noises of each CPU.
func parseRtlaOsnoiseHist(o *rtlaOutput) (*Measurement, error) {
	return parseRtlaHist(o, []rtlaColumnName{{prefix: "CPU-", kind: rtlaSingle}})
}

// rtlaOsnoiseTop parses rtla osnoise top and rtla hwnoise.
type rtlaOsnoiseTop struct {
	rtlaTop
	cols int // fields per row: 12, or 9 for hwnoise; 0 before the header
}

func parseRtlaOsnoiseTop(o *rtlaOutput) (*Measurement, error) {
	return o.read(&rtlaOsnoiseTop{rtlaTop: rtlaTop{o: o}})
}

func (t *rtlaOsnoiseTop) line(n int, _ string, f []string) error {
	s := strings.Join(f, " ")
	switch {
	case s == "Operating System Noise" || s == "Hardware-related Noise":
		t.restart()
		return nil
	case f[0] == "duration:":
		return t.duration(n, s)
	case strings.HasPrefix(s, "CPU Period"):
		return t.columns(n, s)
	case t.cols == 0:
		if rtlaDigits(f[0]) {
			return t.o.errorf(n, "a CPU row before the column header")
		}
		// Text before the table, such as the command line, has no data.
		return nil
	}
	return t.row(n, f)
}

// restart begins a new table, whose width its header will say.
func (t *rtlaOsnoiseTop) restart() {
	t.newTable()
	t.cols = 0
}

// duration reads "duration:   0 00:01:00 | time is in us".
func (t *rtlaOsnoiseTop) duration(n int, s string) error {
	elapsed, unit, ok := strings.Cut(strings.TrimPrefix(s, "duration:"), "|")
	if !ok || strings.TrimSpace(unit) != "time is in us" {
		return t.o.errorf(n, "expected \"duration: days hh:mm:ss | time is in us\"")
	}
	d, err := rtlaDuration(elapsed)
	if err != nil {
		return t.o.errorf(n, "%v", err)
	}
	t.o.m.Duration = d
	return nil
}

func (t *rtlaOsnoiseTop) columns(n int, s string) error {
	switch s {
	case rtlaOsnoiseTopHeader:
		t.cols = 12
	case rtlaHwnoiseTopHeader:
		t.cols = 9
	default:
		return t.o.errorf(n, "unknown rtla osnoise top column header")
	}
	return t.columnHeader(n)
}

// row reads one CPU's sums over its periods; every time is in µs.
func (t *rtlaOsnoiseTop) row(n int, f []string) error {
	switch {
	case len(f) < t.cols:
		return t.o.errorf(n, "truncated row: %d of %d columns", len(f), t.cols)
	case len(f) > t.cols:
		return t.o.errorf(n, "the row has %d columns, the header %d", len(f), t.cols)
	}
	cpu, err := t.rowCPU(n, f[0])
	if err != nil {
		return err
	}
	o, err := t.osnoise(n, f)
	if err != nil {
		return err
	}
	t.seen[cpu] = n
	t.o.m.cpu(cpu).Osnoise = o
	return nil
}

func (t *rtlaOsnoiseTop) osnoise(n int, f []string) (*Osnoise, error) {
	o := &Osnoise{}
	periods, ok := strings.CutPrefix(f[1], "#")
	p, err := strconv.Atoi(periods)
	if !ok || !rtlaDigits(periods) || err != nil {
		return nil, t.o.errorf(n, "%s", rtlaNumberError("Period", f[1], errNumber))
	}
	if p < 1 {
		return nil, t.o.errorf(n, "a CPU with no periods")
	}
	o.Periods = p
	if o.Available, err = rtlaAvailable(f[4]); err != nil {
		return nil, t.o.errorf(n, "%s", rtlaNumberError("% CPU Aval", f[4], err))
	}
	// rtla top only sums the periods, so the worst period's share is
	// unknown; the overall share is the best bound it gives.
	o.MinAvailable = o.Available
	times := []struct {
		dst  *time.Duration
		col  int
		name string
	}{{&o.Runtime, 2, "Runtime"}, {&o.Noise, 3, "Noise"}, {&o.MaxNoise, 5, "Max Noise"}, {&o.MaxSingle, 6, "Max Single"}}
	for _, c := range times {
		if *c.dst, err = rtlaTime(f[c.col], time.Microsecond); err != nil {
			return nil, t.o.errorf(n, "%s", rtlaNumberError(c.name, f[c.col], err))
		}
	}
	// The longest single noise is part of its period's noise, which is
	// part of the total, which is part of the runtime.
	if !(o.MaxSingle <= o.MaxNoise && o.MaxNoise <= o.Noise && o.Noise <= o.Runtime) {
		return nil, t.o.errorf(n, "max single %v, max noise %v, noise %v and runtime %v cannot be one CPU's", o.MaxSingle, o.MaxNoise, o.Noise, o.Runtime)
	}
	// hwnoise stops at NMI: it disables interrupts, so it has no IRQ,
	// softirq or thread noise to count.
	counts := []struct {
		dst  *Count
		name string
	}{{&o.HW, "HW"}, {&o.NMI, "NMI"}, {&o.IRQ, "IRQ"}, {&o.SIRQ, "Softirq"}, {&o.Thread, "Thread"}}
	for i, s := range f[7:] {
		if *counts[i].dst, err = rtlaCount(s); err != nil {
			return nil, t.o.errorf(n, "%s", rtlaNumberError(counts[i].name, s, err))
		}
	}
	return o, nil
}

// rtlaAvailable reads rtla's "%3d.%05d" share, truncated by the kernel to
// five decimals; ParseFloat gives the float64 nearest to what was printed.
func rtlaAvailable(s string) (Percent, error) {
	whole, frac, ok := strings.Cut(s, ".")
	if !ok || len(whole) > 3 || len(frac) != 5 || !rtlaDigits(whole) || !rtlaDigits(frac) {
		return 0, errNumber
	}
	p, err := strconv.ParseFloat(s, 64)
	if err != nil || p > 100 {
		return 0, errNumber
	}
	return Percent(p), nil
}

func (t *rtlaOsnoiseTop) finish() (*Measurement, error) {
	if err := t.lastTable(); err != nil {
		return nil, err
	}
	t.o.m.sortCPUs()
	return t.o.m, nil
}
