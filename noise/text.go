package noise

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ansi matches the terminal escapes rtla 6.1 prints even when its output is
// not a terminal (colours, clear screen, cursor up).
var ansi = regexp.MustCompile(`\x1b(\[[0-9;?]*[A-Za-z]|c)`)

// outputLines splits tool output into lines without terminal escapes or the
// carriage returns a serial console adds.
func outputLines(out []byte) []string {
	s := ansi.ReplaceAllString(string(out), "")
	s = strings.ReplaceAll(s, "\r", "")
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// usec converts a whole number of microseconds as printed by a tool.
func usec(s string) (time.Duration, error) { return scaled(s, time.Microsecond) }

// scaled converts a whole number in unit (time.Microsecond or
// time.Nanosecond) as printed by a tool.
func scaled(s string, unit time.Duration) (time.Duration, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > int64(maxDuration/unit) {
		return 0, errNumber
	}
	return time.Duration(n) * unit, nil
}

// scaledFloat converts a decimal number in unit (an average).
func scaledFloat(s string, unit time.Duration) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f*float64(unit) >= float64(maxDuration) || f != f {
		return 0, errNumber
	}
	return time.Duration(f*float64(unit) + 0.5), nil
}

// count converts an event count as printed by a tool.
func count(s string) (Count, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, errNumber
	}
	return Count(n), nil
}

const maxDuration = time.Duration(1<<63 - 1)

type numberError struct{}

func (numberError) Error() string { return "not a number kbisect can hold" }

var errNumber error = numberError{}
