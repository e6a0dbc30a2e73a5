// Package report owns every rendering of what kbisect found, for people
// and for CI: a run (the answer as git prints it, the tested kernels, the
// confirmation, the last good and first bad kernels compared), an A/B
// comparison, a night and a machine's history, a measurement; as text
// for mail (72 columns), markdown, JSON, one self-contained HTML page with
// hand-drawn SVG plots, and JUnit XML. The HTML and JUnit writers take a
// plain Document; the run's and the A/B's reports are filled from their
// results or from a state directory at any time (FromState), the night's
// and the history's from plain models the nightly fills.
//
// It runs nothing. It may import bisect (commit subjects and ancestry),
// configs (the setup a report names), lab (the evidence it renders),
// noise (tables, values, statistics), simulate (a simulation's tally),
// kbuild's and remote's results (an artifact, a host's facts), verdict and
// the internal helpers; never run, nightly or the CLI.
package report

import (
	"kbisect/verdict"
	"math"
	"strconv"
	"strings"
)

// Document is what a report shows: a bisection, an A/B comparison, or both.
type Document struct {
	Kind       string   // "run" or "ab"
	Title      string   // e.g. "kbisect: 1a2b3c4d5e6f is the first bad commit (system-0)"
	Result     string   // "found", "inconclusive", "not-reproduced", "aborted", "in-progress", or for ab "different"/"no-difference"
	Summary    []string // the verdict in a few lines, shown at the top
	Machine    string   // machine name
	Command    string   // the exact kbisect command to reproduce
	BootParams string
	Config     []string // the kernel configuration used: base config, fragments, options (one line each)
	Metric     Metric
	Tested     []Tested // bisection: tested commits in history order, oldest first (empty for ab)
	AB         *AB      // nil when there is no A/B comparison
	Text       string   // the full plain-text report (per-CPU tables etc.), shown verbatim in a <pre>
	Checks     []Check  // what was checked beyond the verdicts (a run's confirmation)
	Generated  string   // when the report was made (RFC 3339), shown in the footer
}

// FileExt is the file name extension of each report format, as a job's
// report.formats names them.
var FileExt = map[string]string{"text": "txt", "markdown": "md", "json": "json", "html": "html", "junit": "junit.xml"}

// Check is one thing a report vouches for, or not: a JUnit test case,
// failed when Failure says why.
type Check struct {
	Name    string
	Failure string
	Detail  string
}

// Metric is the metric verdicts are made on.
type Metric struct {
	Name         string  // e.g. "noise", "max", "latency"
	Label        string  // human label e.g. "noise per period"
	Kind         string  // "time" (values in nanoseconds), "count", "percent" (0-100), "number"
	Threshold    float64 // in the same unit as the values; 0 with HasThreshold false when there is none
	HasThreshold bool
	HigherIsBad  bool
}

// Tested is one tested commit of a bisection.
type Tested struct {
	Commit            string          // full hash
	Subject           string          // first line of the commit message
	Verdict           verdict.Verdict // good, bad, skip
	Endpoint          bool            // an endpoint measured in calibration
	Culprit           bool            // the first bad commit
	Values            []float64       // one per sample (may be empty for skips)
	Median, Low, High float64         // the interval drawn (e.g. min..max of samples); ignore when Values is empty
	Note              string          // why, in a line
}

// AB is a comparison of two kernels.
type AB struct {
	A, B                       Side
	Conclusion                 string  // one line, e.g. "B is 4,900× less noisy than A on all 32 CPUs, p < 0.001"
	P                          float64 // p-value of the comparison
	Shift, ShiftLow, ShiftHigh float64 // B minus A (Hodges-Lehmann shift) and its confidence interval, in the metric's unit
	Confidence                 float64 // e.g. 0.95
	Significant                bool
}

// Side is one kernel of an A/B comparison.
type Side struct {
	Name   string     // e.g. "A: v6.12.78" or "B: v6.12.78 with 1a2b3c reverted"
	Commit string     // full hash
	Values []float64  // the metric per sample (rounds × samples), in order taken
	PerCPU []CPUValue // per CPU, the worst value over the side's samples, for bars
}

// CPUValue is one CPU's value.
type CPUValue struct {
	CPU   int
	Value float64
}

// unit is what a value is shown in: its suffix and how many of the
// metric's own units make one of it.
type unit struct {
	suffix string
	scale  float64
}

// Time values arrive in nanoseconds; they are shown in the largest of these
// that keeps the number at or above one.
var timeUnits = [...]unit{{"ns", 1}, {"µs", 1e3}, {"ms", 1e6}, {"s", 1e9}}

// unitFor picks the unit a value of magnitude mag reads best in.
func unitFor(kind string, mag float64) unit {
	switch kind {
	case "time":
		for i := len(timeUnits) - 1; i > 0; i-- {
			// Slightly below the boundary so that 999.7 ns, which rounds
			// to 1000 at three digits, is written "1 µs".
			if mag >= timeUnits[i].scale*0.9995 {
				return timeUnits[i]
			}
		}
		return timeUnits[0]
	case "percent":
		return unit{"%", 1}
	}
	return unit{"", 1}
}

// Format writes v, in the metric's unit, the way a person reads it: times
// with a unit that keeps about three significant digits ("850 ns",
// "3.1 µs", "52.7 ms"), counts as integers with thousands separators,
// percentages with "%".
func (m Metric) Format(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case math.IsInf(v, 1):
		return "∞"
	case math.IsInf(v, -1):
		return "-∞"
	}
	switch m.Kind {
	case "time":
		u := unitFor(m.Kind, math.Abs(v))
		return significant(v/u.scale) + " " + u.suffix
	case "count":
		if v == math.Round(v) {
			return fixed(v, 0)
		}
		return fixed(v, 1)
	case "percent":
		if math.Abs(v) >= 1 {
			return fixed(v, 2) + " %"
		}
		return significant(v) + " %"
	}
	if math.Abs(v) >= 1000 {
		return fixed(v, 0)
	}
	return significant(v)
}

// significant writes x with three significant digits, trailing zeros
// dropped, and thousands separators.
func significant(x float64) string {
	a := math.Abs(x)
	var decimals int
	switch {
	case a == 0 || a >= 100:
		decimals = 0
	case a >= 10:
		decimals = 1
	case a >= 1:
		decimals = 2
	default:
		decimals = min(2-int(math.Floor(math.Log10(a))), 9)
	}
	return fixed(x, decimals)
}

// fixed writes x with the given decimals, trailing zeros dropped, and
// thousands separators.
func fixed(x float64, decimals int) string {
	s := strconv.FormatFloat(x, 'f', decimals, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return group(s)
}

// group puts thousands separators into the integer part of a decimal
// number.
func group(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	intPart, frac := s, ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		intPart, frac = s[:i], s[i:]
	}
	if len(intPart) <= 3 {
		return sign + s
	}
	var b strings.Builder
	b.WriteString(sign)
	head := len(intPart) % 3
	if head > 0 {
		b.WriteString(intPart[:head])
	}
	for i := head; i < len(intPart); i += 3 {
		if b.Len() > len(sign) {
			b.WriteByte(',')
		}
		b.WriteString(intPart[i : i+3])
	}
	b.WriteString(frac)
	return b.String()
}
