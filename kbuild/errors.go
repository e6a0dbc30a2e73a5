package kbuild

import (
	"context"
	"errors"
	"fmt"
	"kbisect/internal/commitid"
	"regexp"
	"strings"
)

// BuildError is a commit whose kernel does not build: a bisection skips
// it (or calls it bad when the job bisects build failures).
type BuildError struct {
	Commit string
	Lines  []string // the first error lines of the log
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("%s does not build: %s", commitid.Short(e.Commit), strings.Join(e.Lines, " | "))
}

// SetupError is a build machine that cannot build any kernel: a tool or a
// library is missing, the disk is full, memory ran out. The run stops with
// what to do.
type SetupError struct{ Msg string }

func (e *SetupError) Error() string { return e.Msg }

// ConfigError is a configuration that does not have what the job asks:
// every dropped option, with its reason.
type ConfigError struct {
	Commit  string
	Dropped []Dropped
}

func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Dropped))
	for i, d := range e.Dropped {
		lines[i] = d.String()
	}
	return fmt.Sprintf("the config of %s lacks what the job asks: %s", commitid.Short(e.Commit), strings.Join(lines, "; "))
}

var (
	errorLine = regexp.MustCompile(`(?m)^.*(error:|Error \d+|undefined reference|\*\*\*).*$`)
	setupHint = []struct {
		re   *regexp.Regexp
		hint string
	}{
		{regexp.MustCompile(`No space left on device`), "the disk is full: free space in the build cache or the tree"},
		{regexp.MustCompile(`Cannot allocate memory|Killed signal terminated program|virtual memory exhausted`), "the compiler ran out of memory: lower build.jobs"},
		{regexp.MustCompile(`(flex|bison|bc|perl): (not found|No such file|command not found)`), "a build tool is missing: Debian: apt-get install flex bison bc perl"},
		{regexp.MustCompile(`gelf\.h: No such file|libelf.*not found|Cannot resolve BTF IDs`), "libelf is missing: Debian: apt-get install libelf-dev"},
		{regexp.MustCompile(`openssl/(opensslv|bio|evp)\.h: No such file`), "OpenSSL headers are missing: Debian: apt-get install libssl-dev"},
		{regexp.MustCompile(`pahole \(pahole\) is not available|pahole: (not found|command not found)`), "pahole is missing for CONFIG_DEBUG_INFO_BTF: Debian: apt-get install dwarves (or unset CONFIG_DEBUG_INFO_BTF)"},
		{regexp.MustCompile(`(cpio|zstd|lz4|lzop|xz|rsync): (not found|command not found)`), "a build tool is missing: Debian: apt-get install cpio zstd lz4 lzop xz-utils rsync"},
		{regexp.MustCompile(`(gcc|cc|ld): (not found|command not found)|No such file or directory: 'gcc'`), "the compiler is missing: Debian: apt-get install build-essential"},
	}
)

// classify tells a commit that does not build from a machine that cannot
// build.
func classify(err error, commit, log string) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var se *SetupError
	if errors.As(err, &se) {
		return err
	}
	for _, h := range setupHint {
		if h.re.MatchString(log) {
			return &SetupError{Msg: h.hint + " (" + strings.TrimSpace(h.re.FindString(log)) + ")"}
		}
	}
	lines := errorLine.FindAllString(log, 5)
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	if len(lines) == 0 {
		lines = []string{err.Error()}
	}
	return &BuildError{Commit: commit, Lines: lines}
}
