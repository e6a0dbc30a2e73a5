package remote

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"kbisect/configs"
	"kbisect/internal/shell"
)

// Facts is what a host says about the kernel it runs, read fresh after
// every boot.
type Facts struct {
	Release   string `json:"release"`    // uname -r
	Version   string `json:"version"`    // uname -v: "#1 SMP PREEMPT_RT …"
	BootID    string `json:"boot_id"`    // changes with every boot
	Cmdline   string `json:"cmdline"`    // /proc/cmdline
	Isolated  string `json:"isolated"`   // /sys/devices/system/cpu/isolated
	NohzFull  string `json:"nohz_full"`  // /sys/devices/system/cpu/nohz_full
	PreemptRT bool   `json:"preempt_rt"` // uname -v says PREEMPT_RT
}

// factsScript prints each fact on its own line, in Facts' order. A file a
// kernel lacks (nohz_full without NO_HZ_FULL) prints an empty line.
const factsScript = `# kbisect:facts
uname -r
uname -v
cat /proc/sys/kernel/random/boot_id
cat /proc/cmdline
cat /sys/devices/system/cpu/isolated 2>/dev/null || echo
cat /sys/devices/system/cpu/nohz_full 2>/dev/null || echo
`

// Facts reads the running kernel's facts.
func (h *Host) Facts(ctx context.Context) (Facts, error) {
	out, _, err := h.Run(ctx, shell.Cmd{Script: factsScript})
	if err != nil {
		return Facts{}, err
	}
	return parseFacts(string(out))
}

func parseFacts(out string) (Facts, error) {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 6 {
		return Facts{}, fmt.Errorf("the host's facts came back as %d lines, not 6: %q", len(lines), out)
	}
	f := Facts{Release: lines[0], Version: lines[1], BootID: lines[2], Cmdline: lines[3],
		Isolated: strings.TrimSpace(lines[4]), NohzFull: strings.TrimSpace(lines[5])}
	if f.NohzFull == "(null)" {
		f.NohzFull = ""
	}
	f.PreemptRT = slices.Contains(strings.Fields(f.Version), "PREEMPT_RT")
	return f, nil
}

// Expect is what a test kernel must show once booted.
type Expect struct {
	// Release is the kernel release installed ("" for any).
	Release string
	// Params are the job's boot parameters: every one must be on the
	// command line, and the isolation they ask for in effect.
	Params string
	// Cmdline, when set, is the whole command line the kernel was booted
	// with: the booted one must have exactly its parameters, no more and
	// no fewer (what a boot loader adds aside, see CmdlineDiff).
	Cmdline   string
	PreemptRT bool
}

// Check compares the facts with what was expected and returns every
// difference, each saying what was wanted and what runs: a kernel that
// differs is never measured.
func (f Facts) Check(e Expect) []string {
	var bad []string
	if e.Release != "" && f.Release != e.Release {
		bad = append(bad, fmt.Sprintf("the running kernel is %s, not %s", f.Release, e.Release))
	}
	if e.PreemptRT && !f.PreemptRT {
		bad = append(bad, fmt.Sprintf("PREEMPT_RT is not active (uname -v: %s)", f.Version))
	}
	if e.Cmdline != "" {
		bad = append(bad, CmdlineDiff(e.Cmdline, f.Cmdline)...)
	} else {
		bad = append(bad, paramsMissing(e.Params, f.Cmdline)...)
	}
	bp, err := configs.ParseBootParams(e.Params, 0)
	if err != nil {
		return append(bad, fmt.Sprintf("the job's boot parameters do not parse: %v", err))
	}
	check := func(file, got string, wantCPUs configs.CPUs, what string) {
		if wantCPUs == nil {
			return
		}
		cpus, err := configs.ParseCPUs(got, 0)
		if got == "" {
			cpus, err = configs.CPUs{}, nil
		}
		if err != nil || !slices.Equal(cpus, wantCPUs) {
			bad = append(bad, fmt.Sprintf("%s says %q, not %s: %s", file, got, wantCPUs, what))
		}
	}
	check("/sys/devices/system/cpu/isolated", f.Isolated, bp.Domain(), "isolcpus is not in effect")
	check("/sys/devices/system/cpu/nohz_full", f.NohzFull, bp.Tickless(), "nohz_full is not in effect (is CONFIG_NO_HZ_FULL on?)")
	return bad
}

// paramsMissing names the parameters of params the command line lacks or
// has with another value: what a kernel booted by someone else (the
// host's own, for host check) is held to.
func paramsMissing(params, cmdline string) []string {
	var bad []string
	running := map[string][]string{} // a parameter may be given twice
	for _, p := range configs.SplitCmdline(cmdline) {
		running[p.Name] = append(running[p.Name], p.Value)
	}
	for _, p := range configs.SplitCmdline(params) {
		got := running[p.Name]
		switch {
		case slices.Contains(got, p.Value):
		case len(got) == 0:
			bad = append(bad, fmt.Sprintf("%s is not on the kernel command line", paramText(p)))
		default:
			bad = append(bad, fmt.Sprintf("the command line has %s=%s, not %s", p.Name, strings.Join(got, ","), paramText(p)))
		}
	}
	return bad
}

func paramText(p configs.BootParam) string {
	if p.Value == "" {
		return p.Name
	}
	return p.Name + "=" + p.Value
}
