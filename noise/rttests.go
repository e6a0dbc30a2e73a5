package noise

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// What oslat and cyclictest (rt-tests) share: their output with its line
// numbers, and the JSON file both write with --json.

// jsonLatency reads one thread of a --json file, whose latencies are in
// unit unless the tool says otherwise; a nil Latency means no samples.
type jsonLatency func(t jsonThread, unit time.Duration) (*Latency, time.Duration, error)

// parseRTJSON reads the --json file of tool with latency.
func parseRTJSON(o *rtOutput, tool string, latency jsonLatency) (*Measurement, error) {
	d, err := decodeRTJSON(o)
	if err != nil {
		return nil, err
	}
	m := &Measurement{Tool: tool}
	if v := d.vals["rt_test_version:"]; v != nil { // the colon is rt-tests'
		m.Version = *v
	}
	unit := time.Microsecond
	if r := d.vals["resolution_in_ns"]; r != nil && *r == "1" {
		unit = time.Nanosecond
	} else if r != nil && *r != "0" {
		return nil, d.errorf("resolution_in_ns", "resolution_in_ns is %s, not 0 or 1", *r)
	}
	threads, err := d.threads()
	if err != nil {
		return nil, err
	}
	cpus := make([]int, len(threads))
	pinned := true // cyclictest writes "cpu": -1 for threads it did not pin
	for i, t := range threads {
		s, null, err := t.value("cpu")
		if err != nil {
			return nil, err
		}
		if null {
			return nil, t.errorf("cpu", "cpu is null")
		}
		cpu, err := strconv.Atoi(s)
		if err != nil || cpu > maxCPU || cpu < 0 && (tool == ToolOslat || cpu != -1) {
			return nil, t.errorf("cpu", "cpu %s is not a CPU number", s)
		}
		pinned = pinned && cpu >= 0
		cpus[i] = cpu
	}
	if !pinned {
		m.Warnings = append(m.Warnings, threadIndexWarning)
	}
	seen := map[int]string{}
	for i, t := range threads {
		cpu := cpus[i]
		if !pinned {
			cpu, _ = strconv.Atoi(t.idx)
		}
		if other, dup := seen[cpu]; dup {
			return nil, t.errorf("cpu", "CPU %d is measured by threads %s and %s: kbisect needs one thread per CPU", cpu, other, t.idx)
		}
		seen[cpu] = t.idx
		l, dur, err := latency(t, unit)
		if err != nil {
			return nil, err
		}
		m.Duration = max(m.Duration, dur)
		if l == nil {
			m.Warnings = append(m.Warnings, fmt.Sprintf("thread %s (CPU %d) recorded no samples", t.idx, cpu))
			continue
		}
		if tool == ToolOslat {
			if w := settleOslatAverage(cpu, l); w != "" {
				m.Warnings = append(m.Warnings, w)
			}
		}
		m.CPUs = append(m.CPUs, CPU{CPU: cpu, Latency: l})
	}
	if len(m.CPUs) == 0 {
		return nil, d.errorf("thread", "no thread recorded samples")
	}
	m.sortCPUs()
	return m, nil
}

// rtOutput is an rt-tests tool's output cleaned of terminal escapes, kept
// line by line so that errors can point at the line.
type rtOutput struct {
	tool  string
	lines []string
}

func newRTOutput(tool string, out []byte) *rtOutput {
	return &rtOutput{tool: tool, lines: outputLines(out)}
}

// errorf makes the *ParseError for line n (1-based; 0 for the whole output).
func (o *rtOutput) errorf(n int, format string, args ...any) error {
	e := &ParseError{Tool: o.tool, Line: n, Msg: fmt.Sprintf(format, args...)}
	if n >= 1 && n <= len(o.lines) {
		e.Text = o.lines[n-1]
	}
	return e
}

// usable refuses empty output and usage text, which the rt-tests tools
// print (with exit status 0 for -h) when they reject their command line.
func (o *rtOutput) usable() error {
	blank := true
	for i, line := range o.lines {
		s := strings.TrimSpace(line)
		if strings.HasPrefix(s, "Usage:") {
			return o.errorf(i+1, "this is %s's usage text: it rejected its command line and measured nothing", o.tool)
		}
		blank = blank && s == ""
	}
	if blank {
		return o.errorf(0, "empty output")
	}
	return nil
}

func (o *rtOutput) isJSON() bool {
	for _, line := range o.lines {
		if s := strings.TrimSpace(line); s != "" {
			return strings.HasPrefix(s, "{")
		}
	}
	return false
}

func (o *rtOutput) lastNonBlank() int {
	for i := len(o.lines) - 1; i >= 0; i-- {
		if strings.TrimSpace(o.lines[i]) != "" {
			return i + 1
		}
	}
	return 0
}

// jsonDoc is an rt-tests --json file flattened so that every error can
// name its line: each scalar by its dotted path ("thread.0.max"; nil for
// null), the line of each key, and the keys of each object in order.
type jsonDoc struct {
	o     *rtOutput
	vals  map[string]*string
	lines map[string]int
	keys  map[string][]string
}

func decodeRTJSON(o *rtOutput) (*jsonDoc, error) {
	text := nanAvgRe.ReplaceAllString(strings.Join(o.lines, "\n"), "${1}null")
	// Unmarshal reports a syntax error at its offset in the whole text,
	// which json.Decoder does not always do.
	var se *json.SyntaxError
	if err := json.Unmarshal([]byte(text), new(json.RawMessage)); errors.As(err, &se) {
		return nil, o.errorf(lineAt(text, se.Offset), "invalid JSON: %v", err)
	}
	d := &jsonDoc{o: o, vals: map[string]*string{}, lines: map[string]int{}, keys: map[string][]string{}}
	return d, d.flatten(text)
}

// flatten walks the valid JSON text. It refuses a key twice in one
// object, where encoding/json would silently keep the last.
func (d *jsonDoc) flatten(text string) error {
	type frame struct {
		path, key       string // key is the current key, or array index
		object, wantKey bool
	}
	join := func(path, key string) string { return strings.TrimPrefix(path+"."+key, ".") }
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	lines := lineCounter{text: text}
	stack := []*frame{{}} // the top-level value is "" in this pseudo-array
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return d.o.errorf(lines.at(dec.InputOffset()), "invalid JSON: %v", err)
		}
		top := stack[len(stack)-1]
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				stack = append(stack, &frame{path: join(top.path, top.key), key: "0", object: v == '{', wantKey: v == '{'})
				continue
			}
			stack = stack[:len(stack)-1]
			top = stack[len(stack)-1]
		case string:
			if top.wantKey {
				path := join(top.path, v)
				if _, dup := d.lines[path]; dup {
					return d.o.errorf(lines.at(dec.InputOffset()), "invalid JSON: key %q appears twice in one object", v)
				}
				top.key, top.wantKey = v, false
				d.lines[path] = lines.at(dec.InputOffset())
				d.keys[top.path] = append(d.keys[top.path], v)
				continue
			}
			d.vals[join(top.path, top.key)] = &v
		case nil:
			d.vals[join(top.path, top.key)] = nil
		default: // json.Number or bool
			s := fmt.Sprint(v)
			d.vals[join(top.path, top.key)] = &s
		}
		if top.object {
			top.wantKey = true
		} else {
			n, _ := strconv.Atoi(top.key)
			top.key = strconv.Itoa(n + 1)
		}
	}
}

// errorf reports at the line of path, or of its nearest parent that has one.
func (d *jsonDoc) errorf(path, format string, args ...any) error {
	line, ok := d.lines[path]
	for !ok && path != "" {
		path = path[:max(strings.LastIndexByte(path, '.'), 0)]
		line, ok = d.lines[path]
	}
	return d.o.errorf(line, format, args...)
}

// threads returns the threads in numeric order; num_threads must count them.
func (d *jsonDoc) threads() ([]jsonThread, error) {
	idx := d.keys["thread"]
	if len(idx) == 0 {
		return nil, d.errorf("thread", "the JSON holds no thread results")
	}
	if n := d.vals["num_threads"]; n != nil && *n != strconv.Itoa(len(idx)) {
		return nil, d.errorf("num_threads", "num_threads is %s but %d threads follow", *n, len(idx))
	}
	var threads []jsonThread
	for _, k := range idx {
		if n, err := strconv.Atoi(k); err != nil || n < 0 || n > maxCPU || strconv.Itoa(n) != k {
			return nil, d.errorf("thread."+k, "thread key %q is not a thread index", k)
		}
		threads = append(threads, jsonThread{d: d, idx: k, path: "thread." + k})
	}
	// Canonical numbers sort by length, then digits.
	sort.Slice(threads, func(i, j int) bool {
		a, b := threads[i].idx, threads[j].idx
		return len(a) < len(b) || len(a) == len(b) && a < b
	})
	return threads, nil
}

// jsonThread is the object of one thread, at path "thread.<idx>".
type jsonThread struct {
	d         *jsonDoc
	idx, path string
}

func (t jsonThread) errorf(key, format string, args ...any) error {
	return t.d.errorf(t.path+"."+key, "thread %s: %s", t.idx, fmt.Sprintf(format, args...))
}

// value returns the scalar at key; nan says it is null.
func (t jsonThread) value(key string) (s string, nan bool, err error) {
	v, ok := t.d.vals[t.path+"."+key]
	if !ok {
		return "", false, t.errorf(key, "no %q value", key)
	}
	if v == nil {
		return "", true, nil
	}
	return *v, false, nil
}

// latency returns the number at key in unit.
func (t jsonThread) latency(key string, unit time.Duration) (time.Duration, error) {
	s, nan, err := t.value(key)
	if err != nil {
		return 0, err
	}
	d, err := decimal(s, unit)
	if err != nil || nan {
		return 0, t.errorf(key, "%s %q is not a number kbisect can hold", key, s)
	}
	return d, nil
}

// histogram returns the buckets in order (the JSON keys them by their
// bound in unit and leaves out empty ones) and their total.
func (t jsonThread) histogram(unit time.Duration) ([]Bucket, Count, error) {
	var hist []Bucket
	var total Count
	for _, key := range t.d.keys[t.path+".histogram"] {
		upper, err := decimal(key, unit)
		if err != nil {
			return nil, 0, t.errorf("histogram."+key, "bucket %q is not a latency", key)
		}
		s, _, _ := t.value("histogram." + key)
		c, err := count(s)
		if err != nil || total+c < total {
			return nil, 0, t.errorf("histogram."+key, "bucket %s count %q is not a number kbisect can hold", key, s)
		}
		total += c
		hist = append(hist, Bucket{Upper: upper, Count: c})
	}
	sort.Slice(hist, func(i, j int) bool { return hist[i].Upper < hist[j].Upper })
	for i := 1; i < len(hist); i++ {
		if hist[i].Upper == hist[i-1].Upper {
			return nil, 0, t.errorf("histogram", "two buckets for %v", hist[i].Upper)
		}
	}
	return hist, total, nil
}

// lineAt returns the 1-based line holding byte offset off of text.
func lineAt(text string, off int64) int {
	return (&lineCounter{text: text}).at(off)
}

// lineCounter turns increasing offsets into lines in linear time overall.
type lineCounter struct {
	text string
	off  int64
	line int
}

func (c *lineCounter) at(off int64) int {
	off = min(max(off, 0), int64(len(c.text)))
	if off < c.off {
		c.off, c.line = 0, 0
	}
	c.line += strings.Count(c.text[c.off:off], "\n")
	c.off = off
	return 1 + c.line
}
