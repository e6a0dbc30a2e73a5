package noise

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// CommandMetric says where a custom command prints its number: a regular
// expression (its one group, or the group named "value") or a JSON path,
// and the unit of the number (0 for a plain number).
type CommandMetric struct {
	Pattern  *regexp.Regexp
	JSONPath string
	Unit     time.Duration
}

// ParseCommand takes a custom command's numbers from its output: every
// match of the pattern (the epoll benchmark prints one run time per
// thread count), or the value at the JSON path. Times come out in
// nanoseconds.
func ParseCommand(out []byte, cm CommandMetric) (*Measurement, error) {
	m := &Measurement{Tool: ToolCommand, Unit: "number"}
	if cm.Unit != 0 {
		m.Unit = "ns"
	}
	var raw []string
	var err error
	switch {
	case cm.Pattern != nil && cm.JSONPath != "":
		return nil, fmt.Errorf("command metric: give a pattern or a JSON path, not both")
	case cm.Pattern != nil:
		raw, err = patternValues(out, cm.Pattern)
	case cm.JSONPath != "":
		raw, err = jsonPathValues(out, cm.JSONPath)
	default:
		return nil, fmt.Errorf("command metric: no pattern and no JSON path")
	}
	if err != nil {
		return nil, err
	}
	for _, r := range raw {
		f, err := strconv.ParseFloat(strings.ReplaceAll(r, ",", ""), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, &ParseError{Tool: ToolCommand, Msg: fmt.Sprintf("%q is not a number", clip(r))}
		}
		if cm.Unit != 0 {
			f *= float64(cm.Unit)
		}
		m.Numbers = append(m.Numbers, f)
	}
	return m, nil
}

func patternValues(out []byte, re *regexp.Regexp) ([]string, error) {
	group := re.SubexpIndex("value")
	if group < 0 {
		if re.NumSubexp() != 1 {
			return nil, fmt.Errorf("command metric: the pattern needs one group, or one named value (it has %d)", re.NumSubexp())
		}
		group = 1
	}
	var vals []string
	for _, line := range outputLines(out) {
		for _, m := range re.FindAllStringSubmatch(line, -1) {
			vals = append(vals, m[group])
		}
	}
	if len(vals) == 0 {
		return nil, &ParseError{Tool: ToolCommand, Msg: fmt.Sprintf("the pattern %q matched nothing in the output (%s)", re, tail(out))}
	}
	return vals, nil
}

// tail quotes the last line of output, for "matched nothing" errors.
func tail(out []byte) string {
	lines := outputLines(out)
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.TrimSpace(lines[i]) != "" {
			return fmt.Sprintf("its last line: %q", clip(strings.TrimSpace(lines[i])))
		}
	}
	return "it printed nothing"
}

var pathStep = regexp.MustCompile(`^(?:\.?([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\])`)

// jsonPathValues reads the number at a path like "results[0].max_ns"
// (a leading "$." or "." is allowed); a path that ends at a list of
// numbers gives them all.
func jsonPathValues(out []byte, path string) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &ParseError{Tool: ToolCommand, Msg: fmt.Sprintf("the output is not JSON: %v", err)}
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(path, "$"), ".")
	walked := "$"
	for rest != "" {
		m := pathStep.FindStringSubmatch(rest)
		if m == nil {
			return nil, fmt.Errorf("command metric: %q is not a JSON path", path)
		}
		rest = rest[len(m[0]):]
		if m[1] != "" {
			obj, ok := v.(map[string]any)
			if !ok {
				return nil, &ParseError{Tool: ToolCommand, Msg: fmt.Sprintf("%s is not an object, so it has no %q", walked, m[1])}
			}
			if v, ok = obj[m[1]]; !ok {
				return nil, &ParseError{Tool: ToolCommand, Msg: fmt.Sprintf("%s has no key %q", walked, m[1])}
			}
			walked += "." + m[1]
			continue
		}
		i, _ := strconv.Atoi(m[2])
		list, ok := v.([]any)
		if !ok || i >= len(list) {
			return nil, &ParseError{Tool: ToolCommand, Msg: fmt.Sprintf("%s has no element %d", walked, i)}
		}
		v = list[i]
		walked += "[" + m[2] + "]"
	}
	number := func(x any) (string, bool) {
		switch n := x.(type) {
		case json.Number:
			return n.String(), true
		case string:
			_, err := strconv.ParseFloat(n, 64)
			return n, err == nil
		}
		return "", false
	}
	if list, ok := v.([]any); ok {
		var vals []string
		for _, x := range list {
			s, ok := number(x)
			if !ok {
				return nil, &ParseError{Tool: ToolCommand, Msg: fmt.Sprintf("%s holds something that is not a number", walked)}
			}
			vals = append(vals, s)
		}
		if len(vals) == 0 {
			return nil, &ParseError{Tool: ToolCommand, Msg: fmt.Sprintf("%s is an empty list", walked)}
		}
		return vals, nil
	}
	s, ok := number(v)
	if !ok {
		return nil, &ParseError{Tool: ToolCommand, Msg: fmt.Sprintf("%s is not a number", walked)}
	}
	return []string{s}, nil
}
