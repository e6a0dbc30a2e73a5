package noise

import (
	"strings"
	"time"
)

// rtlaTimerlatColumns name the columns of rtla timerlat hist: IRQ-NNN,
// Thr-NNN and, with user threads (-u, the default since rtla 6.10),
// Usr-NNN.
var rtlaTimerlatColumns = []rtlaColumnName{
	{prefix: "IRQ-", all: "IRQ", kind: rtlaIRQ},
	{prefix: "Thr-", all: "Thr", kind: rtlaThread},
	{prefix: "Usr-", all: "Usr", kind: rtlaUser},
}

// rtlaTimerlatBlocks name the blocks of rtla timerlat top by the title
// above each, "<name> Timer Latency (us)".
var rtlaTimerlatBlocks = map[string]rtlaKind{"IRQ": rtlaIRQ, "Thread": rtlaThread, "Ret user": rtlaUser}

// parseRtlaTimerlatHist reads rtla timerlat hist: one histogram per CPU
// and context (IRQ, kernel thread, user thread).
func parseRtlaTimerlatHist(o *rtlaOutput) (*Measurement, error) {
	return parseRtlaHist(o, rtlaTimerlatColumns)
}

// rtlaTimerlatTop parses rtla timerlat top.
type rtlaTimerlatTop struct {
	rtlaTop
	kinds  []rtlaKind    // the blocks, in the order of their titles
	unit   time.Duration // µs, or ns with -n
	counts Count         // the rows' COUNTs, summed as rtla sums them for ALL
	all    *rtlaTopAll
}

// rtlaTopAll is the ALL row of rtla ≥ 6.10: rtla's own sums over the rows.
type rtlaTopAll struct {
	line     int
	mantissa Count // rtla prints the total COUNT as "#mantissa eexponent"
	exp      int
	min, max []time.Duration
	none     []bool // the block printed "-": no row had a value
}

func parseRtlaTimerlatTop(o *rtlaOutput) (*Measurement, error) {
	return o.read(&rtlaTimerlatTop{rtlaTop: rtlaTop{o: o}})
}

func (t *rtlaTimerlatTop) line(n int, line string, f []string) error {
	s := strings.Join(f, " ")
	switch {
	case s == "Timer Latency":
		t.restart()
		return nil
	case strings.Contains(s, "Timer Latency ("):
		return t.blocks(n, line)
	case strings.HasPrefix(s, "CPU COUNT"):
		return t.columns(n, line)
	case t.header == 0:
		if rtlaDigits(f[0]) || f[0] == "ALL" {
			return t.o.errorf(n, "a CPU row before the column header")
		}
		// Text before the table, such as the command line, has no data.
		return nil
	case strings.Trim(s, "-|") == "":
		return nil // the rule above the ALL row
	case t.all != nil:
		return t.o.errorf(n, "a row after the ALL row")
	case f[0] == "ALL":
		return t.allRow(n, line)
	}
	return t.row(n, line)
}

// restart begins a new table, whose blocks their titles will say.
func (t *rtlaTimerlatTop) restart() {
	t.newTable()
	t.kinds, t.unit, t.counts, t.all = nil, 0, 0, nil
}

// blocks reads the line that carries the duration and titles the blocks:
// "  0 00:00:05   |   IRQ Timer Latency (us)   |   Thread Timer Latency (us)".
func (t *rtlaTimerlatTop) blocks(n int, line string) error {
	if t.header != 0 {
		return t.o.errorf(n, "block titles inside a table (its header is on line %d)", t.header)
	}
	segs := strings.Split(line, "|")
	d, err := rtlaDuration(segs[0])
	if err != nil {
		return t.o.errorf(n, "%v", err)
	}
	t.o.m.Duration = d
	t.kinds, t.unit = nil, 0
	for _, seg := range segs[1:] {
		kind, unit, ok := rtlaTimerlatBlock(seg)
		if !ok {
			return t.o.errorf(n, "unknown latency block %q", strings.TrimSpace(seg))
		}
		if t.unit != 0 && unit != t.unit {
			return t.o.errorf(n, "the blocks mix time units")
		}
		for _, k := range t.kinds {
			if k == kind {
				return t.o.errorf(n, "two %s blocks", kind)
			}
		}
		t.kinds, t.unit = append(t.kinds, kind), unit
	}
	if len(t.kinds) == 0 {
		return t.o.errorf(n, "no latency block titles")
	}
	return nil
}

// rtlaTimerlatBlock reads one block title, "IRQ Timer Latency (us)".
func rtlaTimerlatBlock(seg string) (rtlaKind, time.Duration, bool) {
	name, unit, ok := strings.Cut(strings.Join(strings.Fields(seg), " "), " Timer Latency (")
	kind, known := rtlaTimerlatBlocks[name]
	switch {
	case !ok || !known:
		return 0, 0, false
	case unit == "us)":
		return kind, time.Microsecond, true
	case unit == "ns)":
		return kind, time.Nanosecond, true
	}
	return 0, 0, false
}

// columns checks "CPU COUNT | cur min avg max | ..." against the titles.
func (t *rtlaTimerlatTop) columns(n int, line string) error {
	if t.kinds == nil {
		return t.o.errorf(n, "a column header without the block titles above it")
	}
	if err := t.columnHeader(n); err != nil {
		return err
	}
	segs := strings.Split(line, "|")
	if strings.Join(strings.Fields(segs[0]), " ") != "CPU COUNT" || len(segs)-1 != len(t.kinds) {
		return t.o.errorf(n, "the column header does not match the %d block titles above it", len(t.kinds))
	}
	for _, seg := range segs[1:] {
		if strings.Join(strings.Fields(seg), " ") != "cur min avg max" {
			return t.o.errorf(n, "unknown rtla timerlat top column header")
		}
	}
	return nil
}

// row reads "CPU #COUNT | cur min avg max | ...". COUNT is the IRQ count,
// the only one rtla prints; the thread and user counts trail it by the
// samples in flight, so it stands for them too.
func (t *rtlaTimerlatTop) row(n int, line string) error {
	segs := strings.Split(line, "|")
	switch {
	case len(segs) < len(t.kinds)+1:
		return t.o.errorf(n, "truncated row: %d of %d blocks", len(segs)-1, len(t.kinds))
	case len(segs) > len(t.kinds)+1:
		return t.o.errorf(n, "the row has %d blocks, the header %d", len(segs)-1, len(t.kinds))
	}
	cpu, count, err := t.rowHead(n, segs[0])
	if err != nil {
		return err
	}
	lats := make([]*Latency, len(t.kinds))
	for j, kind := range t.kinds {
		if lats[j], err = t.block(n, segs[j+1], kind, count); err != nil {
			return err
		}
	}
	if rtlaNone(lats) {
		return t.o.errorf(n, "the row has no latency values")
	}
	c := t.o.m.cpu(cpu)
	for j, kind := range t.kinds {
		if lats[j] == nil {
			t.o.warnf("CPU %d: rtla reported no %s samples", cpu, kind)
			continue
		}
		kind.set(c, lats[j])
	}
	t.seen[cpu] = n
	t.counts = rtlaAddCounts(t.counts, count)
	return nil
}

func (t *rtlaTimerlatTop) rowHead(n int, seg string) (int, Count, error) {
	f := strings.Fields(seg)
	if len(f) != 2 {
		return 0, 0, t.o.errorf(n, "expected \"CPU #COUNT\" before the first |")
	}
	cpu, err := t.rowCPU(n, f[0])
	if err != nil {
		return 0, 0, err
	}
	digits, ok := strings.CutPrefix(f[1], "#")
	count, err := rtlaCount(digits)
	if !ok || err != nil {
		return 0, 0, t.o.errorf(n, "%s", rtlaNumberError("COUNT", f[1], errNumber))
	}
	return cpu, count, nil
}

// block reads one block of a CPU row; nil when rtla printed "-", as it
// does for a context without samples.
func (t *rtlaTimerlatTop) block(n int, seg string, kind rtlaKind, count Count) (*Latency, error) {
	f := strings.Fields(seg)
	if len(f) == 4 && rtlaDashes(f) {
		if kind == rtlaIRQ && count > 0 {
			return nil, t.o.errorf(n, "COUNT is %d but the IRQ block is empty", count)
		}
		return nil, nil
	}
	if len(f) != 4 {
		return nil, t.o.errorf(n, "the %s block has %d values, want cur min avg max", kind, len(f))
	}
	if count == 0 {
		// Without an IRQ count rtla lost events: the sample count of
		// these values is unknown, so they cannot be weighed.
		return nil, t.o.errorf(n, "%s latencies but COUNT is 0", kind)
	}
	if _, err := rtlaTime(f[0], t.unit); err != nil {
		return nil, t.o.errorf(n, "%s", rtlaNumberError(kind.String()+" cur", f[0], err))
	}
	lat := &Latency{Samples: count}
	vals := []struct {
		dst  *time.Duration
		name string
		read func(string, time.Duration) (time.Duration, error)
	}{{&lat.Min, "min", rtlaTime}, {&lat.Avg, "avg", rtlaAvg}, {&lat.Max, "max", rtlaTime}}
	for i, v := range vals {
		var err error
		if *v.dst, err = v.read(f[i+1], t.unit); err != nil {
			return nil, t.o.errorf(n, "%s", rtlaNumberError(kind.String()+" "+v.name, f[i+1], err))
		}
	}
	if lat.Min > lat.Max {
		return nil, t.o.errorf(n, "the %s min %v is above its max %v", kind, lat.Min, lat.Max)
	}
	// rtla averages by integer division: the average stays within
	// [min, max] unless the columns are not what they say.
	if lat.Avg < lat.Min || lat.Avg > lat.Max {
		return nil, t.o.errorf(n, "the %s average %v is outside its min %v and max %v", kind, lat.Avg, lat.Min, lat.Max)
	}
	return lat, nil
}

func rtlaNone(lats []*Latency) bool {
	for _, l := range lats {
		if l != nil {
			return false
		}
	}
	return true
}

func rtlaDashes(f []string) bool {
	for _, s := range f {
		if s != "-" {
			return false
		}
	}
	return true
}

// allRow reads "ALL #NNNNNN eE |  min avg max | ...", kept to check the
// rows against.
func (t *rtlaTimerlatTop) allRow(n int, line string) error {
	segs := strings.Split(line, "|")
	// An empty user block of the ALL row ends with a stray "|".
	if len(segs) == len(t.kinds)+2 && strings.TrimSpace(segs[len(segs)-1]) == "" {
		segs = segs[:len(segs)-1]
	}
	if len(segs) != len(t.kinds)+1 {
		return t.o.errorf(n, "the ALL row has %d blocks, the header %d", len(segs)-1, len(t.kinds))
	}
	f := strings.Fields(segs[0])
	if len(f) != 3 {
		return t.o.errorf(n, "expected \"ALL #count eexponent\" before the first |")
	}
	mant, ok1 := strings.CutPrefix(f[1], "#")
	exp, ok2 := strings.CutPrefix(f[2], "e")
	a := &rtlaTopAll{line: n}
	var err1, err2 error
	a.mantissa, err1 = rtlaCount(mant)
	e, err2 := rtlaCount(exp)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || e > 18 {
		return t.o.errorf(n, "%s", rtlaNumberError("ALL count", f[1]+" "+f[2], errNumber))
	}
	a.exp = int(e)
	for j, kind := range t.kinds {
		if err := a.block(strings.Fields(segs[j+1]), t.unit); err != nil {
			return t.o.errorf(n, "%s", rtlaNumberError("ALL "+kind.String(), strings.TrimSpace(segs[j+1]), err))
		}
	}
	t.all = a
	return nil
}

// block reads an ALL block: min, avg and max, or dashes (rtla prints four
// for an empty thread block, three otherwise).
func (a *rtlaTopAll) block(f []string, unit time.Duration) error {
	if (len(f) == 3 || len(f) == 4) && rtlaDashes(f) {
		a.min, a.max, a.none = append(a.min, 0), append(a.max, 0), append(a.none, true)
		return nil
	}
	if len(f) != 3 {
		return errNumber
	}
	lo, err1 := rtlaTime(f[0], unit)
	_, err2 := rtlaAvg(f[1], unit)
	hi, err3 := rtlaTime(f[2], unit)
	if err1 != nil || err2 != nil || err3 != nil {
		return errNumber
	}
	a.min, a.max, a.none = append(a.min, lo), append(a.max, hi), append(a.none, false)
	return nil
}

// checkAll compares the ALL row with the rows: a disagreement means rows
// were lost or misread, and the result cannot be trusted.
func (t *rtlaTimerlatTop) checkAll() error {
	a := t.all
	if a == nil {
		return nil // rtla before 6.10 prints no ALL row
	}
	mant, exp := t.counts, 0
	for mant > 999999 {
		mant, exp = mant/10, exp+1
	}
	if mant != a.mantissa || exp != a.exp {
		return t.o.errorf(a.line, "ALL #%d e%d disagrees with the rows, whose COUNTs sum to %d", a.mantissa, a.exp, t.counts)
	}
	for j, kind := range t.kinds {
		var lo, hi time.Duration
		seen := false
		for _, c := range t.o.m.CPUs {
			if l := kind.get(&c); l != nil {
				lo, hi = rtlaMinMax(seen, lo, hi, l)
				seen = true
			}
		}
		if seen == a.none[j] || seen && (lo != a.min[j] || hi != a.max[j]) {
			return t.o.errorf(a.line, "the ALL %s block disagrees with the rows (min %v, max %v)", kind, lo, hi)
		}
	}
	return nil
}

func rtlaMinMax(seen bool, lo, hi time.Duration, l *Latency) (time.Duration, time.Duration) {
	if !seen || l.Min < lo {
		lo = l.Min
	}
	if !seen || l.Max > hi {
		hi = l.Max
	}
	return lo, hi
}

func (t *rtlaTimerlatTop) finish() (*Measurement, error) {
	if err := t.lastTable(); err != nil {
		return nil, err
	}
	if err := t.checkAll(); err != nil {
		return nil, err
	}
	t.o.m.sortCPUs()
	return t.o.m, nil
}
