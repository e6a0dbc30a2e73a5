package kbuild

import (
	"context"
	"errors"
	"fmt"
	"kbisect/internal/commitid"
	"regexp"
	"strings"
	"syscall"
)

// BuildError is a commit whose kernel does not build: a bisection skips
// it (or calls it bad when the job bisects build failures). Only a build
// that failed with none of the build machine's faults is one.
type BuildError struct {
	Commit string
	Lines  []string // the first error lines of the log
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("%s does not build: %s", commitid.Short(e.Commit), strings.Join(e.Lines, " | "))
}

// Fault is what about the build machine failed a build.
type Fault string

// The build machine's faults.
const (
	// FaultDisk: no space or inodes left, a quota, a read-only file system.
	FaultDisk Fault = "disk"
	// FaultIO: the disk answered with an I/O error.
	FaultIO Fault = "io"
	// FaultMemory: memory ran out, the compiler was OOM-killed.
	FaultMemory Fault = "memory"
	// FaultCache: the compiler cache failed.
	FaultCache Fault = "cache"
	// FaultTool: a build tool or library is missing.
	FaultTool Fault = "tool"
	// FaultTimeout: make did not finish within build.timeout.
	FaultTimeout Fault = "timeout"
)

// SetupError is a build machine that cannot build a kernel now: the disk
// is full or failing, memory ran out, the compiler cache failed, a tool
// or a library is missing. It is the lab's fault, never the commit's: the
// run stops with its state kept and the same command resumes once the
// machine is fixed.
type SetupError struct {
	Fault Fault
	Msg   string // what to do
	// Evidence is what showed it: the facts measured after the failure
	// (free space, the signal that killed make, OOM kills), then the
	// lines of make's output that agree.
	Evidence []string
}

func (e *SetupError) Error() string {
	if len(e.Evidence) == 0 {
		return e.Msg
	}
	return e.Msg + " (" + strings.Join(e.Evidence, "; ") + ")"
}

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

const (
	hintDisk   = "the disk is full: free space in the build cache, the tree or the temporary directory"
	hintIO     = "the disk of the build returned I/O errors: check it (dmesg) before resuming"
	hintMemory = "the compiler ran out of memory: lower build.jobs or free memory"
	hintCache  = "the compiler cache failed: check ccache's directory (ccache -s), or set build.ccache: false"
	// hintTimeout takes make's targets and the timeout.
	hintTimeout = "make %s did not finish within build.timeout (%s) and was stopped: raise build.timeout in the job file, " +
		"or find what slows the build machine down (a hung compiler, swapping, a slow disk)"
)

type hint struct {
	re    *regexp.Regexp
	fault Fault
	hint  string
}

var (
	errorLine = regexp.MustCompile(`(?m)^.*(error:|Error \d+|undefined reference|\*\*\*).*$`)
	// labLines are the lines of make's output that name a fault of the
	// build machine: evidence when the facts measured after the failure
	// do not say it themselves (ld removes the output it could not write,
	// and the disk has room again).
	labLines = []hint{
		{regexp.MustCompile(`(?m)^.*(No space left on device|Disk quota exceeded|Read-only file system).*$`), FaultDisk, hintDisk},
		{regexp.MustCompile(`(?m)^.*(Input/output error|: I/O error).*$`), FaultIO, hintIO},
		{regexp.MustCompile(`(?m)^.*(Cannot allocate memory|Killed signal terminated program|virtual memory exhausted|out of memory|Error 137|\*\*\* \[[^]]*\] Killed$)`), FaultMemory, hintMemory},
		{regexp.MustCompile(`(?m)^.*ccache: (error|FATAL):.*$`), FaultCache, hintCache},
	}
	setupHint = []hint{
		{regexp.MustCompile(`(flex|bison|bc|perl): (not found|No such file|command not found)`), FaultTool, "a build tool is missing: Debian: apt-get install flex bison bc perl"},
		{regexp.MustCompile(`gelf\.h: No such file|libelf.*not found|Cannot resolve BTF IDs`), FaultTool, "libelf is missing: Debian: apt-get install libelf-dev"},
		{regexp.MustCompile(`openssl/(opensslv|bio|evp)\.h: No such file`), FaultTool, "OpenSSL headers are missing: Debian: apt-get install libssl-dev"},
		{regexp.MustCompile(`pahole \(pahole\) is not available|pahole: (not found|command not found)`), FaultTool, "pahole is missing for CONFIG_DEBUG_INFO_BTF: Debian: apt-get install dwarves (or unset CONFIG_DEBUG_INFO_BTF)"},
		{regexp.MustCompile(`(cpio|zstd|lz4|lzop|xz|rsync): (not found|command not found)`), FaultTool, "a build tool is missing: Debian: apt-get install cpio zstd lz4 lzop xz-utils rsync"},
		{regexp.MustCompile(`(gcc|cc|ld): (not found|command not found)|No such file or directory: 'gcc'`), FaultTool, "the compiler is missing: Debian: apt-get install build-essential"},
	}
)

// classify tells a commit that does not build from a machine that cannot
// build: first by the facts measured when make failed (the room left on
// the build's file systems, the signal that killed make, the kernel's OOM
// kills while it ran), then by the lines of its output that name such a
// fault. Only what remains is the commit's.
func classify(err error, commit, log string, facts buildFacts) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var se *SetupError
	if errors.As(err, &se) {
		return err
	}
	if full := facts.full(); len(full) > 0 {
		return &SetupError{Fault: FaultDisk, Msg: hintDisk, Evidence: append(full, outputEvidence(log)...)}
	}
	var me *makeError
	if errors.As(err, &me) {
		var ev []string
		if me.oomKills > 0 {
			ev = append(ev, fmt.Sprintf("the kernel OOM-killed %d process(es) while make ran", me.oomKills))
		}
		if me.signal == syscall.SIGKILL {
			ev = append(ev, "make was killed by SIGKILL")
		}
		if len(ev) > 0 {
			return &SetupError{Fault: FaultMemory, Msg: hintMemory, Evidence: append(ev, outputEvidence(log)...)}
		}
	}
	for _, h := range labLines {
		if l := h.re.FindString(log); l != "" {
			return &SetupError{Fault: h.fault, Msg: h.hint, Evidence: []string{strings.TrimSpace(l)}}
		}
	}
	for _, h := range setupHint {
		if h.re.MatchString(log) {
			return &SetupError{Fault: h.fault, Msg: h.hint, Evidence: []string{strings.TrimSpace(h.re.FindString(log))}}
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

// outputEvidence is the first line of make's output that names a fault
// of the build machine, if any.
func outputEvidence(log string) []string {
	for _, h := range labLines {
		if l := h.re.FindString(log); l != "" {
			return []string{"make said: " + strings.TrimSpace(l)}
		}
	}
	return nil
}

// fileFault types an error of kbisect's own writes (the slot's config,
// the cache's artifacts and metadata) by its errno: a full or failing
// disk is the machine's fault; anything else is returned as it is.
func fileFault(err error) error {
	var se *SetupError
	if err == nil || errors.As(err, &se) {
		return err
	}
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EROFS):
		return &SetupError{Fault: FaultDisk, Msg: hintDisk, Evidence: []string{err.Error()}}
	case errors.Is(err, syscall.EIO):
		return &SetupError{Fault: FaultIO, Msg: hintIO, Evidence: []string{err.Error()}}
	}
	return err
}
