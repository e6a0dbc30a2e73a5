package configs

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Duration is a length of time written with a unit: "90s", "10m", "1h30m",
// and for latencies "20us", "1.5ms", "500ns" ("µs" is accepted for "us").
type Duration time.Duration

// ParseDuration parses a duration that must carry a unit.
func ParseDuration(s string) (Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty duration")
	}
	if _, err := strconv.ParseFloat(t, 64); err == nil {
		return 0, fmt.Errorf("%q has no unit (write e.g. %ss, %sms or %sus)", s, t, t, t)
	}
	t = strings.NewReplacer("µs", "us", "μs", "us").Replace(t)
	if days, ok := strings.CutSuffix(t, "d"); ok {
		// Days, for the ages of a history: 7d.
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || n < 0 || n > 3650 {
			return 0, fmt.Errorf("%q is not a number of days (write e.g. 7d)", s)
		}
		return Duration(n * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (write e.g. 90s, 10m, 1h30m, 20us, 1.5ms)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return Duration(d), nil
}

// String writes the duration the way people write it ("20us", "10m").
func (d Duration) String() string {
	t := time.Duration(d)
	switch {
	case t == 0:
		return "0s"
	case t%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", t/(24*time.Hour))
	case t%time.Hour == 0:
		return fmt.Sprintf("%dh", t/time.Hour)
	case t%time.Minute == 0 && t < time.Hour:
		return fmt.Sprintf("%dm", t/time.Minute)
	case t >= time.Second:
		s := t.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		return strings.Replace(s, "h0m", "h", 1)
	case t%time.Millisecond == 0:
		return fmt.Sprintf("%dms", t/time.Millisecond)
	case t%time.Microsecond == 0:
		return fmt.Sprintf("%dus", t/time.Microsecond)
	case t >= time.Microsecond:
		return strconv.FormatFloat(float64(t)/float64(time.Microsecond), 'f', -1, 64) + "us"
	}
	return fmt.Sprintf("%dns", int64(t))
}

// D is the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalYAML writes the duration with its unit.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// Size is a number of bytes written with a unit: "512MiB", "20GiB", "2G".
type Size int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"TB", 1000 * 1000 * 1000 * 1000},
	{"B", 1},
}

// ParseSize parses a size with a unit (K, M, G, T are binary, as QEMU and
// du read them; KB, MB, GB, TB are decimal).
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	for _, u := range sizeUnits {
		num, ok := strings.CutSuffix(t, u.suffix)
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f*float64(u.mult) > math.MaxInt64/2 {
			break
		}
		return Size(f * float64(u.mult)), nil
	}
	return 0, fmt.Errorf("%q is not a size (write e.g. 512MiB, 20GiB)", s)
}

// String writes the size in the largest binary unit that divides it.
func (s Size) String() string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if int64(s) >= u.mult && int64(s)%u.mult == 0 {
			return fmt.Sprintf("%d%s", int64(s)/u.mult, u.suffix)
		}
	}
	return fmt.Sprintf("%dB", int64(s))
}

// MarshalYAML writes the size with its unit.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }

// ThresholdKind says what a threshold compares against.
type ThresholdKind int

// Kinds of threshold.
const (
	ThresholdUnset   ThresholdKind = iota
	ThresholdAuto                  // derived from the endpoints at calibration
	ThresholdTime                  // an absolute time, e.g. 20us
	ThresholdRatio                 // a factor of the good endpoint, e.g. 3x
	ThresholdPercent               // a percentage, e.g. 99.5%
	ThresholdNumber                // a plain number, for counts and command values
)

// Threshold is where good ends and bad begins: "auto", "20us", "1.5ms",
// "3x" (three times the good endpoint), "99.5%" or a plain number.
type Threshold struct {
	Kind  ThresholdKind
	Time  time.Duration // ThresholdTime
	Value float64       // ThresholdRatio, ThresholdPercent, ThresholdNumber
}

// ParseThreshold parses a threshold.
func ParseThreshold(s string) (Threshold, error) {
	t := strings.TrimSpace(s)
	bad := fmt.Errorf("%q is not a threshold (write a time like 20us or 1.5ms, a ratio like 3x, a percentage like 99.5%%, a number, or auto)", s)
	switch {
	case t == "auto":
		return Threshold{Kind: ThresholdAuto}, nil
	case strings.HasSuffix(t, "x") || strings.HasSuffix(t, "×"):
		f, err := parseNumber(strings.TrimSuffix(strings.TrimSuffix(t, "x"), "×"))
		if err != nil {
			return Threshold{}, bad
		}
		if f <= 1 {
			return Threshold{}, fmt.Errorf("ratio %s must be more than 1x (how many times worse than the good endpoint is bad)", t)
		}
		return Threshold{Kind: ThresholdRatio, Value: f}, nil
	case strings.HasSuffix(t, "%"):
		f, err := parseNumber(strings.TrimSuffix(t, "%"))
		if err != nil {
			return Threshold{}, bad
		}
		if f < 0 || f > 100 {
			return Threshold{}, fmt.Errorf("percentage %s is not between 0%% and 100%%", t)
		}
		return Threshold{Kind: ThresholdPercent, Value: f}, nil
	}
	if f, err := parseNumber(t); err == nil {
		return Threshold{Kind: ThresholdNumber, Value: f}, nil
	}
	d, err := ParseDuration(t)
	if err != nil {
		return Threshold{}, bad
	}
	if d == 0 {
		return Threshold{}, fmt.Errorf("threshold %s is zero: every kernel would be bad", t)
	}
	return Threshold{Kind: ThresholdTime, Time: d.D()}, nil
}

func parseNumber(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("not a number")
	}
	return f, nil
}

// String writes the threshold as it is written in a job file.
func (t Threshold) String() string {
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	switch t.Kind {
	case ThresholdAuto:
		return "auto"
	case ThresholdTime:
		return Duration(t.Time).String()
	case ThresholdRatio:
		return num(t.Value) + "x"
	case ThresholdPercent:
		return num(t.Value) + "%"
	case ThresholdNumber:
		return num(t.Value)
	}
	return ""
}

// MarshalYAML writes the threshold as text.
func (t Threshold) MarshalYAML() (any, error) { return t.String(), nil }

// Path is a file or directory named in a job file. Relative paths are
// relative to the file that names them, and "~/" is the user's home; both
// are resolved when the job is loaded.
type Path string

// MarshalYAML writes the resolved path.
func (p Path) MarshalYAML() (any, error) { return string(p), nil }

// Command is a shell command from a job file (power_cycle, console, a
// boot script, a background load, a custom workload). It may name
// environment variables as ${NAME} for secrets such as a BMC password:
// kbisect never substitutes them into the text. The text is what is shown
// and stored; the variables are exported into the environment of the shell
// that runs the command, which expands them itself.
type Command string

var envRef = regexp.MustCompile(`\\\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// Refs returns the ${NAME} variables the command uses, sorted, without
// those kbisect itself sets (KBISECT_*) and escaped ones (\${NAME}, which
// the shell leaves as text).
func (c Command) Refs() []string {
	seen := map[string]bool{}
	for _, m := range envRef.FindAllStringSubmatch(string(c), -1) {
		if m[1] != "" && !strings.HasPrefix(m[1], "KBISECT_") {
			seen[m[1]] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Env returns NAME=value for every variable the command uses, looked up
// with lookup (os.LookupEnv when nil), or an error naming the unset ones.
// The values are for the process that runs the command: never print them.
func (c Command) Env(lookup func(string) (string, bool)) ([]string, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var env, missing []string
	for _, name := range c.Refs() {
		v, ok := lookup(name)
		if !ok {
			missing = append(missing, name)
			continue
		}
		env = append(env, name+"="+v)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return env, nil
}

// MarshalYAML writes the command as written, variables unexpanded.
func (c Command) MarshalYAML() (any, error) { return string(c), nil }
