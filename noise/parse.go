package noise

import (
	"fmt"
	"strings"
)

// ParseTools are the tools whose output Parse reads.
var ParseTools = []string{ToolOsnoise, ToolRtlaOsnoise, ToolRtlaTimerlat, ToolOslat, ToolCyclictest}

// Parse reads a tool's output: the osnoise tracer's trace (or the seed's
// table), rtla osnoise or timerlat top or hist, oslat text or JSON,
// cyclictest text, histogram or JSON (in µs). A custom command's output
// needs its CommandMetric: see ParseCommand.
func Parse(tool string, out []byte) (*Measurement, error) {
	switch tool {
	case ToolOsnoise:
		return ParseOsnoise(out)
	case ToolRtlaOsnoise:
		return ParseRtlaOsnoise(out)
	case ToolRtlaTimerlat:
		return ParseRtlaTimerlat(out)
	case ToolOslat:
		return ParseOslat(out)
	case ToolCyclictest:
		return ParseCyclictest(out)
	}
	return nil, fmt.Errorf("no parser for %q (one of %s)", tool, strings.Join(ParseTools, ", "))
}
