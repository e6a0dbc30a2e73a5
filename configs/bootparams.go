package configs

import (
	"fmt"
	"slices"
	"strings"
)

// BootParams is the isolation part of a kernel command line, parsed as the
// kernel reads it.
type BootParams struct {
	// NohzFull, IsolCPUs, RCUNocbs, IRQAffinity and KthreadCPUs are the
	// CPU lists of those parameters as the kernel keeps them (the first
	// nohz_full and isolcpus, the last of the others); nil when absent.
	NohzFull    CPUs
	IsolCPUs    CPUs
	RCUNocbs    CPUs
	IRQAffinity CPUs
	KthreadCPUs CPUs
	// IsolFlags are isolcpus's flags (nohz, domain, managed_irq).
	IsolFlags []string
	// Params are all parameters in order.
	Params []BootParam
}

// BootParam is one "name=value" (or bare "name") of a command line.
type BootParam struct {
	// Name is the parameter's name with '-' read as '_', as the kernel
	// compares them.
	Name  string
	Value string
	// Raw is the parameter as written, quotes and dashes kept.
	Raw string
	// Offset and ValueOffset are the byte offsets of the name and of the
	// value in the command line.
	Offset, ValueOffset int
}

// IsolationParams are the parameters whose value is (or ends in) a CPU
// list that isolates CPUs or routes work away from them.
var IsolationParams = []string{"nohz_full", "isolcpus", "rcu_nocbs", "irqaffinity", "kthread_cpus"}

var isolcpusFlags = []string{"nohz", "domain", "managed_irq"}

// firstWins are the parameters of which the kernel keeps the first: the
// housekeeping setup refuses a second one that differs.
var firstWins = []string{"nohz_full", "isolcpus"}

// BootParamError is an error in one parameter of a command line.
type BootParamError struct {
	Param  string
	Offset int // byte offset in the command line where the problem is
	Err    error
}

func (e *BootParamError) Error() string { return fmt.Sprintf("%s: %v", e.Param, e.Err) }

// BootParamErrors is every error of a command line, in order.
type BootParamErrors []*BootParamError

func (e BootParamErrors) Error() string {
	msgs := make([]string, len(e))
	for i, x := range e {
		msgs[i] = x.Error()
	}
	return strings.Join(msgs, "; ")
}

// SplitCmdline splits a kernel command line into parameters the way the
// kernel does: on spaces, with double quotes grouping a value.
func SplitCmdline(line string) []BootParam {
	var out []BootParam
	i := 0
	for i < len(line) {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i >= len(line) {
			break
		}
		start := i
		quoted := false
		for i < len(line) && (quoted || !isSpace(line[i])) {
			if line[i] == '"' {
				quoted = !quoted
			}
			i++
		}
		raw := line[start:i]
		p := BootParam{Offset: start, ValueOffset: i, Raw: raw}
		name, value, hasValue := strings.Cut(raw, "=")
		if hasValue {
			p.ValueOffset = start + len(name) + 1
			if strings.HasPrefix(value, `"`) {
				p.ValueOffset++
			}
		}
		p.Name = strings.ReplaceAll(strings.ReplaceAll(name, `"`, ""), "-", "_")
		p.Value = strings.ReplaceAll(value, `"`, "")
		out = append(out, p)
	}
	return out
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// ParseBootParams parses a command line and the CPU lists of its isolation
// parameters. nrCPUs, when known, also rejects CPUs the machine lacks. The
// error, if any, is a BootParamErrors listing every bad parameter.
func ParseBootParams(line string, nrCPUs int) (*BootParams, error) {
	bp := &BootParams{Params: SplitCmdline(line)}
	var errs BootParamErrors
	for _, p := range bp.Params {
		if err := bp.parseParam(p, nrCPUs); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return bp, nil
}

func (bp *BootParams) parseParam(p BootParam, nrCPUs int) *BootParamError {
	if !slices.Contains(IsolationParams, p.Name) {
		return nil
	}
	valueOff, list := p.ValueOffset, p.Value
	var flags []string
	if p.Name == "isolcpus" {
		// As the kernel: words that start with a letter are flags.
		for list != "" && isLetter(list[0]) {
			flag, rest, _ := strings.Cut(list, ",")
			if !slices.Contains(isolcpusFlags, flag) {
				return &BootParamError{p.Name, valueOff, fmt.Errorf("unknown flag %q (isolcpus takes nohz, domain, managed_irq, then a CPU list)", flag)}
			}
			flags = append(flags, flag)
			valueOff += len(flag) + 1
			list = rest
		}
	}
	if list == "" {
		if p.Name == "rcu_nocbs" {
			// A bare rcu_nocbs (6.0 and newer) offloads no CPU at boot; it
			// only allows offloading them later.
			bp.RCUNocbs = CPUs{}
			return nil
		}
		return &BootParamError{p.Name, p.Offset, fmt.Errorf("no CPU list")}
	}
	cpus, err := ParseCPUs(list, nrCPUs)
	if err != nil {
		off := valueOff
		if ce, ok := err.(*cpuError); ok {
			off += ce.offset
		}
		return &BootParamError{p.Name, off, err}
	}
	switch p.Name {
	case "nohz_full":
		if bp.NohzFull == nil {
			bp.NohzFull = cpus
		}
	case "isolcpus":
		if bp.IsolCPUs == nil {
			bp.IsolCPUs, bp.IsolFlags = cpus, flags
		}
	case "rcu_nocbs":
		bp.RCUNocbs = cpus
	case "irqaffinity":
		bp.IRQAffinity = cpus
	case "kthread_cpus":
		bp.KthreadCPUs = cpus
	}
	return nil
}

func isLetter(b byte) bool { return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') }

// isolcpusHas reports whether isolcpus isolates in the given way: "domain"
// (also when no flag is given) or "nohz".
func (bp *BootParams) isolcpusHas(flag string) bool {
	if bp.IsolCPUs == nil {
		return false
	}
	if len(bp.IsolFlags) == 0 {
		return flag == "domain"
	}
	return slices.Contains(bp.IsolFlags, flag)
}

// Tickless returns the CPUs whose tick stops (nohz_full, or isolcpus with
// the nohz flag); nil when none.
func (bp *BootParams) Tickless() CPUs {
	if bp.NohzFull != nil {
		return bp.NohzFull
	}
	if bp.isolcpusHas("nohz") {
		return bp.IsolCPUs
	}
	return nil
}

// Domain returns the CPUs isolcpus takes out of the scheduler domains
// (what /sys/devices/system/cpu/isolated lists); nil when none.
func (bp *BootParams) Domain() CPUs {
	if bp.isolcpusHas("domain") {
		return bp.IsolCPUs
	}
	return nil
}

// Isolated returns the CPUs the command line isolates: tickless and out of
// the scheduler domains when both are asked for, else whichever is; nil
// when neither is.
func (bp *BootParams) Isolated() CPUs {
	tick := bp.Tickless()
	dom := bp.isolcpusHas("domain")
	switch {
	case tick != nil && dom:
		return tick.Intersect(bp.IsolCPUs)
	case tick != nil:
		return tick
	case dom:
		return bp.IsolCPUs
	}
	return nil
}

// NoCallbackCPUs returns the CPUs whose RCU callbacks are offloaded: those
// of rcu_nocbs, and every nohz_full CPU, which the kernel adds itself.
func (bp *BootParams) NoCallbackCPUs() CPUs {
	out := append(CPUs{}, bp.RCUNocbs...)
	for _, c := range bp.Tickless() {
		if !out.Contains(c) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}
