package noise

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The timerlat tracer's own trace file (tracefs, no rtla): one line per
// activation and context, "#seq context irq|thread|user-ret
// timer_latency N ns", with the same prefix as osnoise's lines.
var timerlatLine = regexp.MustCompile(`^\s*.+-\d+\s+(?:\(\s*[\d-]+\)\s+)?\[(\d+)\]\s+(?:[.a-zA-Z0-9]{4,8}\s+)?\d+(?:\.\d+)?:\s+#\d+\s+context\s+(irq|thread|user-ret)\s+timer_latency\s+(\d+)\s+ns\s*$`)

// isTimerlatTrace reports whether out is the timerlat tracer's trace.
func isTimerlatTrace(out []byte) bool {
	for _, line := range outputLines(out) {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "# tracer:") {
			return strings.HasSuffix(t, " timerlat")
		}
		if timerlatLine.MatchString(line) {
			return true
		}
	}
	return false
}

// parseTimerlatTrace reads the timerlat tracer's trace into the latencies
// per CPU and context; other events of the same buffer (osnoise's
// irq_noise, thread_noise…) are passed over.
func parseTimerlatTrace(out []byte) (*Measurement, error) {
	m := &Measurement{Tool: ToolRtlaTimerlat}
	lines := outputLines(out)
	type acc struct {
		n        Count
		sum      time.Duration
		min, max time.Duration
	}
	stats := map[int]map[string]*acc{}
	for n, line := range lines {
		text := strings.TrimSpace(line)
		if text == "" || strings.HasPrefix(text, "#") || isStackLine(text) {
			continue
		}
		f := timerlatLine.FindStringSubmatch(line)
		if f == nil {
			if traceEvent.MatchString(line) || strings.Contains(text, "stop tracing hit") {
				m.StopHit = m.StopHit || strings.Contains(text, "stop tracing hit")
				continue
			}
			return nil, &ParseError{Tool: ToolRtlaTimerlat, Line: n + 1, Text: line, Msg: "not a timerlat line, event or comment"}
		}
		cpu, err := strconv.Atoi(f[1])
		if err != nil || cpu > maxCPU {
			return nil, &ParseError{Tool: ToolRtlaTimerlat, Line: n + 1, Text: line, Msg: "CPU out of range"}
		}
		lat, err := scaled(f[3], time.Nanosecond)
		if err != nil {
			return nil, &ParseError{Tool: ToolRtlaTimerlat, Line: n + 1, Text: line, Msg: fmt.Sprintf("latency %s: %v", f[3], err)}
		}
		if stats[cpu] == nil {
			stats[cpu] = map[string]*acc{}
		}
		a := stats[cpu][f[2]]
		if a == nil {
			a = &acc{min: lat}
			stats[cpu][f[2]] = a
		}
		a.n++
		a.sum += lat
		a.min, a.max = min(a.min, lat), max(a.max, lat)
	}
	if len(stats) == 0 {
		return nil, &ParseError{Tool: ToolRtlaTimerlat, Msg: "no timer_latency lines: was the timerlat tracer running?"}
	}
	for cpu, byCtx := range stats {
		c := m.cpu(cpu)
		for ctx, a := range byCtx {
			l := &Latency{Samples: a.n, Min: a.min, Max: a.max, Avg: a.sum / time.Duration(a.n)}
			switch ctx {
			case "irq":
				c.IRQLatency = l
			case "thread":
				c.Latency = l
			default:
				c.UserLatency = l
			}
		}
	}
	m.sortCPUs()
	return m, nil
}

// isStackLine reports whether a trace line belongs to a kernel stack
// trace (print_stack, or a stop with a stack): "<stack trace>" and
// "=> function" lines.
func isStackLine(text string) bool {
	return strings.HasPrefix(text, "=> ") || strings.HasSuffix(text, ": <stack trace>")
}
