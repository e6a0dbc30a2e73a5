package noise

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// rtlaColumnName is how an rtla histogram names one kind of column: the
// prefix before the CPU number, and the name in the ALL: block ("" when
// the tool prints none).
type rtlaColumnName struct {
	prefix, all string
	kind        rtlaKind
}

// rtlaHistColumn is one column of an rtla histogram: one CPU seen one way.
type rtlaHistColumn struct {
	name          string
	cpu           int
	kind          rtlaKind
	buckets       []Bucket
	over          Count
	inBuckets     Count // the samples in the buckets and over:, to check count
	count         Count
	min, avg, max time.Duration
}

// rtlaHistStage is where a histogram parser is in rtla's fixed order.
type rtlaHistStage int

const (
	rtlaHistHead    rtlaHistStage = iota // comments, until the Index header
	rtlaHistBuckets                      // bucket rows, until over:
	rtlaHistSummary                      // count:, min:, avg:, max:
	rtlaHistTail                         // an ALL: block may follow (timerlat, rtla ≥ 6.10)
	rtlaHistAllRows                      // the ALL: block's count:, min:, avg:, max:
	rtlaHistDone
)

var rtlaSummaryRows = [...]string{"count:", "min:", "avg:", "max:"}

func rtlaSummaryLabel(s string) bool {
	for _, r := range rtlaSummaryRows {
		if s == r {
			return true
		}
	}
	return false
}

// rtlaHist parses the histogram layout that rtla osnoise hist and rtla
// timerlat hist share.
type rtlaHist struct {
	o     *rtlaOutput
	names []rtlaColumnName
	unit  time.Duration
	stage rtlaHistStage
	next  int    // the summary row expected next, an index into rtlaSummaryRows
	rows  [4]int // lines of the count:, min:, avg: and max: rows
	index int    // line of the Index header
	label int64  // the last bucket row's label
	cols  []rtlaHistColumn
	all   rtlaHistAll
}

// rtlaHistAll is the ALL: block: rtla's own sums over the columns.
type rtlaHistAll struct {
	kinds    []rtlaKind
	rows     [4]int
	count    []Count
	min, max []time.Duration
}

func parseRtlaHist(o *rtlaOutput, names []rtlaColumnName) (*Measurement, error) {
	return o.read(&rtlaHist{o: o, names: names, unit: time.Microsecond})
}

func (h *rtlaHist) line(n int, _ string, f []string) error {
	switch h.stage {
	case rtlaHistHead:
		return h.head(n, f)
	case rtlaHistBuckets:
		if f[0] == "over:" {
			return h.over(n, f)
		}
		return h.bucket(n, f)
	case rtlaHistSummary:
		return h.summary(n, f)
	case rtlaHistTail:
		if f[0] == "ALL:" && h.names[0].all != "" {
			return h.allHeader(n, f[1:])
		}
	case rtlaHistAllRows:
		return h.allSummary(n, f)
	}
	return h.o.errorf(n, "unexpected line after the histogram")
}

// head reads the comment lines above the Index header. Other text there
// (a command line, a shell prompt) carries no data and is skipped.
func (h *rtlaHist) head(n int, f []string) error {
	s := strings.Join(f, " ")
	switch {
	case f[0] == "Index":
		return h.indexHeader(n, f[1:])
	case strings.HasPrefix(s, "# RTLA "):
		if s != "# RTLA "+h.o.name+" histogram" {
			return h.o.errorf(n, "not the title of an rtla %s histogram", h.o.name)
		}
	case strings.HasPrefix(s, "# Time unit is "):
		switch strings.TrimPrefix(s, "# Time unit is ") {
		case "microseconds (us)":
			h.unit = time.Microsecond
		case "nanoseconds (ns)":
			h.unit = time.Nanosecond
		default:
			return h.o.errorf(n, "unknown time unit")
		}
	case strings.HasPrefix(s, "# Duration:"):
		d, err := rtlaDuration(strings.TrimPrefix(s, "# Duration:"))
		if err != nil {
			return h.o.errorf(n, "%v", err)
		}
		h.o.m.Duration = d
	case rtlaDigits(f[0]) || f[0] == "over:" || f[0] == "ALL:" || rtlaSummaryLabel(f[0]):
		return h.o.errorf(n, "histogram data before the Index header")
	}
	return nil
}

// indexHeader maps the columns to CPUs by their names: rtla leaves out the
// CPUs without samples, so positions mean nothing.
func (h *rtlaHist) indexHeader(n int, names []string) error {
	if len(names) == 0 {
		return h.o.errorf(n, "the Index header names no column: no CPU recorded a sample")
	}
	type key struct {
		kind rtlaKind
		cpu  int
	}
	seen := map[key]bool{}
	for _, name := range names {
		col, ok := h.column(name)
		if !ok {
			return h.o.errorf(n, "%q is not a column of an rtla %s histogram", name, h.o.name)
		}
		k := key{col.kind, col.cpu}
		if seen[k] {
			return h.o.errorf(n, "CPU %d has two %s columns", col.cpu, col.kind)
		}
		seen[k] = true
		h.cols = append(h.cols, col)
	}
	h.index, h.stage, h.label = n, rtlaHistBuckets, -1
	return nil
}

func (h *rtlaHist) column(name string) (rtlaHistColumn, bool) {
	for _, cn := range h.names {
		if num, ok := strings.CutPrefix(name, cn.prefix); ok {
			cpu, err := rtlaCPU(num)
			return rtlaHistColumn{name: name, cpu: cpu, kind: cn.kind}, err == nil
		}
	}
	return rtlaHistColumn{}, false
}

// values returns a row's values, one per column of the Index header.
func (h *rtlaHist) values(n int, f []string) ([]string, error) {
	v := f[1:]
	switch {
	case len(v) < len(h.cols):
		return nil, h.o.errorf(n, "truncated row: %d of %d columns", len(v), len(h.cols))
	case len(v) > len(h.cols):
		return nil, h.o.errorf(n, "the row has %d columns, the Index header %d", len(v), len(h.cols))
	}
	return v, nil
}

// bucket reads a histogram row. rtla prints each bucket's lower edge,
// index*bucket size, and counts there every sample whose whole µs (ns
// with -n) value v has lower edge <= v < lower edge + bucket size. Upper
// is that label: with the default bucket size of 1, which the output
// does not print, it is the largest whole value the bucket counts, as
// Bucket.Upper promises; with -b N a bucket reaches N-1 units further.
func (h *rtlaHist) bucket(n int, f []string) error {
	label, err := strconv.ParseInt(f[0], 10, 64)
	if !rtlaDigits(f[0]) || err != nil {
		return h.o.errorf(n, "expected a bucket row or over:")
	}
	upper, err := rtlaTime(f[0], h.unit)
	if err != nil {
		return h.o.errorf(n, "%s", rtlaNumberError("bucket", f[0], err))
	}
	if label <= h.label {
		return h.o.errorf(n, "bucket %d does not follow bucket %d", label, h.label)
	}
	h.label = label
	return h.counts(n, f, func(c *rtlaHistColumn, k Count) {
		if k > 0 {
			c.buckets = append(c.buckets, Bucket{Upper: upper, Count: k})
		}
	})
}

// over reads the samples beyond the last bucket.
func (h *rtlaHist) over(n int, f []string) error {
	h.stage, h.next = rtlaHistSummary, 0
	return h.counts(n, f, func(c *rtlaHistColumn, k Count) { c.over = k })
}

func (h *rtlaHist) counts(n int, f []string, store func(*rtlaHistColumn, Count)) error {
	v, err := h.values(n, f)
	if err != nil {
		return err
	}
	for i, s := range v {
		k, err := rtlaCount(s)
		if err != nil {
			return h.o.errorf(n, "%s", rtlaNumberError(h.cols[i].name, s, err))
		}
		h.cols[i].inBuckets = rtlaAddCounts(h.cols[i].inBuckets, k)
		store(&h.cols[i], k)
	}
	return nil
}

// summary reads count:, min:, avg: and max:, in this order.
func (h *rtlaHist) summary(n int, f []string) error {
	if f[0] != rtlaSummaryRows[h.next] {
		return h.o.errorf(n, "expected the %s row", rtlaSummaryRows[h.next])
	}
	v, err := h.values(n, f)
	if err != nil {
		return err
	}
	for i, s := range v {
		if err := h.cols[i].setSummary(h.next, s, h.unit); err != nil {
			return h.o.errorf(n, "%s", rtlaNumberError(h.cols[i].name, s, err))
		}
	}
	h.rows[h.next] = n
	if h.next++; h.next == len(rtlaSummaryRows) {
		h.stage = rtlaHistTail
	}
	return nil
}

// setSummary stores the value of summary row r (count, min, avg or max).
func (c *rtlaHistColumn) setSummary(r int, s string, unit time.Duration) error {
	if r == 0 {
		var err error
		c.count, err = rtlaCount(s)
		return err
	}
	d, err := rtlaSummaryValue(s, c.count, r == 2, unit)
	switch r {
	case 1:
		c.min = d
	case 2:
		c.avg = d
	case 3:
		c.max = d
	}
	return err
}

// rtlaSummaryValue reads a min, avg or max of count samples.
func rtlaSummaryValue(s string, count Count, avg bool, unit time.Duration) (time.Duration, error) {
	switch {
	case count == 0 && (s == "-" || rtlaDigits(strings.Replace(s, ".", "", 1))):
		// Nothing was measured: newer rtla prints "-", older ones
		// whatever their empty accumulators held.
		return 0, nil
	case s == "-":
		return 0, fmt.Errorf("no value for %d samples", count)
	case avg:
		return rtlaAvg(s, unit)
	}
	return rtlaTime(s, unit)
}

// allHeader reads "ALL:" and the kinds its block sums (IRQ, Thr, Usr).
func (h *rtlaHist) allHeader(n int, names []string) error {
	if len(names) == 0 {
		return h.o.errorf(n, "the ALL: header names no column")
	}
	for _, name := range names {
		kind, ok := h.allKind(name)
		if !ok {
			return h.o.errorf(n, "%q is not a column of rtla's ALL: summary", name)
		}
		for _, k := range h.all.kinds {
			if k == kind {
				return h.o.errorf(n, "the ALL: header names %s twice", name)
			}
		}
		h.all.kinds = append(h.all.kinds, kind)
	}
	h.stage, h.next = rtlaHistAllRows, 0
	return nil
}

func (h *rtlaHist) allKind(name string) (rtlaKind, bool) {
	for _, cn := range h.names {
		if cn.all != "" && cn.all == name {
			return cn.kind, true
		}
	}
	return 0, false
}

// allSummary reads the ALL: block's rows, which are checked against the
// columns once all are read.
func (h *rtlaHist) allSummary(n int, f []string) error {
	r := h.next
	if f[0] != rtlaSummaryRows[r] {
		return h.o.errorf(n, "expected the ALL: %s row", rtlaSummaryRows[r])
	}
	v := f[1:]
	if len(v) != len(h.all.kinds) {
		return h.o.errorf(n, "the ALL: row has %d values, its header %d", len(v), len(h.all.kinds))
	}
	for j, s := range v {
		if err := h.all.set(r, j, s, h.unit); err != nil {
			return h.o.errorf(n, "%s", rtlaNumberError("ALL: "+h.all.kinds[j].String(), s, err))
		}
	}
	h.all.rows[r] = n
	if h.next++; h.next == len(rtlaSummaryRows) {
		h.stage = rtlaHistDone
	}
	return nil
}

func (a *rtlaHistAll) set(r, j int, s string, unit time.Duration) error {
	if r == 0 {
		k, err := rtlaCount(s)
		a.count = append(a.count, k)
		return err
	}
	d, err := rtlaSummaryValue(s, a.count[j], r == 2, unit)
	switch r {
	case 1:
		a.min = append(a.min, d)
	case 3:
		a.max = append(a.max, d)
	}
	return err
}

func (h *rtlaHist) finish() (*Measurement, error) {
	if err := h.complete(); err != nil {
		return nil, err
	}
	for i := range h.cols {
		if err := h.store(&h.cols[i]); err != nil {
			return nil, err
		}
	}
	if err := h.checkAll(); err != nil {
		return nil, err
	}
	if len(h.o.m.CPUs) == 0 {
		return nil, h.o.errorf(h.index, "no column of the histogram holds a sample")
	}
	h.o.m.sortCPUs()
	return h.o.m, nil
}

// complete refuses a histogram that ends early: without its summary
// there is no maximum (over: hides the tail), so there is no result.
func (h *rtlaHist) complete() error {
	end := h.o.lastText()
	switch h.stage {
	case rtlaHistHead:
		return h.o.errorf(end, "the output ends before the histogram's Index header")
	case rtlaHistBuckets:
		return h.o.errorf(end, "the histogram ends before its over: row")
	case rtlaHistSummary:
		return h.o.errorf(end, "the histogram ends before its %s row (is it cut short, or did rtla run with --no-summary?)",
			rtlaSummaryRows[h.next])
	case rtlaHistAllRows:
		return h.o.errorf(end, "the ALL: summary ends before its %s row", rtlaSummaryRows[h.next])
	}
	return nil
}

// store puts a column into its CPU; a column without samples only leaves
// a warning.
func (h *rtlaHist) store(c *rtlaHistColumn) error {
	if c.count == 0 {
		h.o.warnf("CPU %d: rtla reported no %s samples (column %s)", c.cpu, c.kind, c.name)
		return nil
	}
	if c.min > c.max {
		return h.o.errorf(h.rows[1], "%s: min %v is above max %v", c.name, c.min, c.max)
	}
	if c.avg < c.min || c.avg > c.max {
		// rtla 6.1's osnoise hist printed avg 0 until a stable fix.
		h.o.warnf("CPU %d: the %s average %v printed by rtla lies outside min %v and max %v",
			c.cpu, c.kind, c.avg, c.min, c.max)
	}
	if c.inBuckets != c.count {
		h.o.warnf("CPU %d: the %s histogram holds %d samples, its count %d", c.cpu, c.kind, c.inBuckets, c.count)
	}
	c.kind.set(h.o.m.cpu(c.cpu), &Latency{
		Samples:   c.count,
		Min:       c.min,
		Avg:       c.avg,
		Max:       c.max,
		Histogram: c.buckets,
		Overflow:  c.over,
	})
	return nil
}

// checkAll compares rtla's ALL: block with the columns. A disagreement
// means columns were lost or misread, and the result cannot be trusted.
func (h *rtlaHist) checkAll() error {
	for j, kind := range h.all.kinds {
		var sum Count
		var lo, hi time.Duration
		for _, c := range h.cols {
			if c.kind != kind || c.count == 0 {
				continue
			}
			if sum == 0 || c.min < lo {
				lo = c.min
			}
			if sum == 0 || c.max > hi {
				hi = c.max
			}
			sum = rtlaAddCounts(sum, c.count)
		}
		switch {
		case h.all.count[j] != sum:
			return h.o.errorf(h.all.rows[0], "the ALL: %s count %d disagrees with its columns, which sum to %d",
				kind, h.all.count[j], sum)
		case sum > 0 && h.all.min[j] != lo:
			return h.o.errorf(h.all.rows[1], "the ALL: %s min %v disagrees with its columns' %v", kind, h.all.min[j], lo)
		case sum > 0 && h.all.max[j] != hi:
			return h.o.errorf(h.all.rows[3], "the ALL: %s max %v disagrees with its columns' %v", kind, h.all.max[j], hi)
		}
	}
	return nil
}

// rtlaAddCounts adds without wrapping, so garbled counts cannot turn
// negative.
func rtlaAddCounts(a, b Count) Count {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
