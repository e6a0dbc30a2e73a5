package remote

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"kbisect/configs"
	"kbisect/internal/shell"
)

// Where a base command line came from.
const (
	// BaseFromJob is the job's boot.base_cmdline.
	BaseFromJob = "boot.base_cmdline"
	// BaseFromRunning is the host's own kernel's, running at first
	// contact.
	BaseFromRunning = "running"
	// BaseFromRecord is the host's own kernel's as the host recorded it
	// when it last ran it: at first contact a test kernel ran.
	BaseFromRecord = "host-record"
)

// Base is the command line a host's test kernels start from, before the
// job's parameters: the host's own kernel's, or the job's
// boot.base_cmdline. It is recorded once, at first contact, and never
// read again from whatever kernel the host runs later: a parameter one
// job adds must not follow the host into the next.
type Base struct {
	Cmdline string `json:"cmdline"`
	// From is BaseFromJob, BaseFromRunning or BaseFromRecord.
	From string `json:"from"`
	// Release is the host's own kernel the line is of, Running the kernel
	// that ran at first contact (they differ for BaseFromRecord).
	Release  string    `json:"release,omitempty"`
	Running  string    `json:"running,omitempty"`
	Host     string    `json:"host,omitempty"`
	Recorded time.Time `json:"recorded"`
}

// String says what the base is and where it came from, for messages.
func (b Base) String() string {
	switch b.From {
	case BaseFromRunning:
		return fmt.Sprintf("%q (%s's own kernel %s, read at first contact)", b.Cmdline, b.Host, b.Release)
	case BaseFromRecord:
		return fmt.Sprintf("%q (%s's own kernel %s, as the host recorded it when it last ran it; it runs %s now)", b.Cmdline, b.Host, b.Release, b.Running)
	}
	return fmt.Sprintf("%q (%s)", b.Cmdline, b.From)
}

// OwnCmdlineRecord is where a host keeps its own kernel's command line,
// written whenever kbisect finds it on its own kernel.
const OwnCmdlineRecord = "/var/lib/kbisect/own-cmdline"

// ownCmdlineScript prints where the line comes from, the running release,
// the host's own kernel's release and its command line. On a kernel that
// is not kbisect's it also records them on the host, for a first contact
// that finds a test kernel running. R prefixes the paths (tests).
const ownCmdlineScript = `# kbisect:own-cmdline
set -e
R=%s
r=$(uname -r)
rec="$R"` + OwnCmdlineRecord + `
ours=
case $r in *-kbisect-*) ours=1 ;; esac
[ -e "$R/boot/.kbisect-$r" ] && ours=1
if [ -n "$ours" ]; then
	if [ -r "$rec" ]; then
		echo ` + BaseFromRecord + `; echo "$r"; cat "$rec"
		exit 0
	fi
	echo "it runs $r, a test kernel kbisect installed, and holds no record of its own kernel's command line ($rec)" >&2
	exit 3
fi
mkdir -p "${rec%%/*}"
{ echo "$r"; cat /proc/cmdline; } >"$rec.new"
mv "$rec.new" "$rec"
echo ` + BaseFromRunning + `; echo "$r"; echo "$r"; cat /proc/cmdline
`

// OwnCmdline reads the command line of the host's own kernel: the running
// one's, when that is not a kernel kbisect installed (and records it on
// the host), else the host's record of it. A host on a test kernel
// without a record is refused with what to do.
func (h *Host) OwnCmdline(ctx context.Context) (Base, error) { return h.ownCmdline(ctx, "") }

// ownCmdline is OwnCmdline with every path on the host under root.
func (h *Host) ownCmdline(ctx context.Context, root string) (Base, error) {
	out, _, err := h.Run(ctx, shell.Cmd{Script: fmt.Sprintf(ownCmdlineScript, shell.Quote(strings.TrimSuffix(root, "/")))})
	var ee *shell.ExitError
	if errors.As(err, &ee) && ee.Code == 3 {
		return Base{}, &NoBaseError{Host: h.Name(), Why: strings.TrimSpace(ee.Stderr)}
	}
	if err != nil {
		return Base{}, fmt.Errorf("reading the host's own command line: %w", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 4 || (lines[0] != BaseFromRunning && lines[0] != BaseFromRecord) {
		return Base{}, fmt.Errorf("%s: the host's own command line came back as %q", h.Name(), out)
	}
	return Base{From: lines[0], Running: lines[1], Release: lines[2], Cmdline: strings.TrimSpace(lines[3]),
		Host: h.Name(), Recorded: time.Now().UTC()}, nil
}

// BootCmdline is the command line for the test kernel: the base (the
// host's own kernel's, or boot.base_cmdline) without what a boot loader
// adds (BOOT_IMAGE, initrd), without any isolation parameter and without
// what the job's parameters and extra command line set again, then
// those, each word as written.
func BootCmdline(base, params, extra string) string {
	replaced := map[string]bool{}
	for _, p := range configs.SplitCmdline(params + " " + extra) {
		replaced[p.Name] = true
	}
	var keep []string
	for _, p := range configs.SplitCmdline(base) {
		if slices.Contains(configs.LoaderWords(), p.Name) || isIsolation(p.Name) || replaced[p.Name] {
			continue
		}
		keep = append(keep, p.Raw)
	}
	out := strings.Join(keep, " ")
	for _, s := range []string{params, extra} {
		if s = strings.TrimSpace(s); s != "" {
			out = strings.TrimSpace(out + " " + s)
		}
	}
	return out
}

func isIsolation(name string) bool {
	return slices.Contains(configs.IsolationParams, name)
}

// CmdlineDiff compares a booted kernel's command line with the one it was
// to boot with, parameter by parameter (order aside), and names every
// difference: a parameter missing, one that is there but was not asked
// for (left from an earlier boot, or added by something on the way), a
// value that differs. What a boot loader adds by itself (BOOT_IMAGE,
// initrd) is not a difference unless the wanted line has it too.
func CmdlineDiff(want, got string) []string {
	type values struct{ want, got []configs.BootParam }
	var names []string
	byName := map[string]*values{}
	at := func(name string) *values {
		v, ok := byName[name]
		if !ok {
			v = &values{}
			byName[name] = v
			names = append(names, name)
		}
		return v
	}
	for _, p := range configs.SplitCmdline(want) {
		at(p.Name).want = append(at(p.Name).want, p)
	}
	for _, p := range configs.SplitCmdline(got) {
		if _, asked := byName[p.Name]; !asked && slices.Contains(configs.LoaderWords(), p.Name) {
			continue
		}
		at(p.Name).got = append(at(p.Name).got, p)
	}
	var diffs []string
	for _, name := range names {
		v := byName[name]
		missing, extra := without(v.want, v.got), without(v.got, v.want)
		switch {
		case missing != "" && extra != "":
			diffs = append(diffs, fmt.Sprintf("the command line has %s, not %s", extra, missing))
		case missing != "":
			diffs = append(diffs, fmt.Sprintf("%s is not on the kernel command line", missing))
		case extra != "":
			diffs = append(diffs, fmt.Sprintf("%s is on the kernel command line, but neither the base command line nor the job has it", extra))
		}
	}
	return diffs
}

// without returns the parameters of a that b lacks (by value, as
// multisets), as written in a.
func without(a, b []configs.BootParam) string {
	rest := slices.Clone(b)
	var out []string
	for _, p := range a {
		i := slices.IndexFunc(rest, func(q configs.BootParam) bool { return q.Value == p.Value })
		if i >= 0 {
			rest = slices.Delete(rest, i, i+1)
			continue
		}
		out = append(out, p.Raw)
	}
	return strings.Join(out, " ")
}

// NoBaseError is a host on a test kernel that holds no record of its own
// kernel's command line: no base for a test kernel's.
type NoBaseError struct {
	Host string
	// Why is the host's account: which kernel runs, which record is
	// missing.
	Why string
}

// NoBaseFix is what to do about a NoBaseError.
const NoBaseFix = "boot the host's own kernel once (reboot it), or give boot.base_cmdline"

func (e *NoBaseError) Error() string {
	return fmt.Sprintf("%s: %s: its command line is a test kernel's, not the machine's: %s", e.Host, e.Why, NoBaseFix)
}
