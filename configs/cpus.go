package configs

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// MaxCPUs bounds CPU numbers: the kernel's NR_CPUS tops out at 8192.
const MaxCPUs = 8192

// CPUs is a sorted set of CPU numbers, written in the kernel's cpulist
// format ("1-16,33-48").
type CPUs []int

// ParseCPUs parses a kernel cpulist: "N", "A-B", "A-B:U/G" (U CPUs of
// every group of G), comma-separated, plus "all" and "N" meaning the last
// CPU. When nrCPUs (the machine's CPU count) is known, CPUs beyond it are
// errors. An offset into s comes with every error so callers can point at
// the entry.
func ParseCPUs(s string, nrCPUs int) (CPUs, error) {
	set := map[int]bool{}
	off := 0
	for _, part := range strings.Split(s, ",") {
		if err := parseCPURange(strings.TrimSpace(part), nrCPUs, set); err != nil {
			return nil, &cpuError{offset: off + strings.Index(part, strings.TrimSpace(part)), err: err}
		}
		off += len(part) + 1
	}
	out := make(CPUs, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Ints(out)
	return out, nil
}

// cpuError is a cpulist error at a byte offset of the list.
type cpuError struct {
	offset int
	err    error
}

func (e *cpuError) Error() string { return e.err.Error() }

func parseCPURange(part string, nrCPUs int, set map[int]bool) error {
	if part == "" {
		return fmt.Errorf("empty CPU list entry (write CPUs like 1-16,33-48)")
	}
	if part == "all" {
		if nrCPUs <= 0 {
			return fmt.Errorf(`"all" needs machine.cpus`)
		}
		for c := 0; c < nrCPUs; c++ {
			set[c] = true
		}
		return nil
	}
	rng, group, hasGroup := strings.Cut(part, ":")
	lo, hi, isRange := strings.Cut(rng, "-")
	a, err := cpuNumber(lo, nrCPUs)
	if err != nil {
		return err
	}
	b := a
	if isRange {
		if b, err = cpuNumber(hi, nrCPUs); err != nil {
			return err
		}
		if b < a {
			return fmt.Errorf("CPU range %s runs backwards", rng)
		}
	}
	used, size := 1, 1
	if hasGroup {
		u, g, ok := strings.Cut(group, "/")
		used, err = strconv.Atoi(u)
		if err == nil && ok {
			size, err = strconv.Atoi(g)
		}
		if !ok || err != nil || used < 1 || size < 1 || used > size {
			return fmt.Errorf("bad CPU group %q in %q (write A-B:used/group, e.g. 0-63:1/2)", group, part)
		}
	}
	for c := a; c <= b; c++ {
		if (c-a)%size < used {
			set[c] = true
		}
	}
	return nil
}

func cpuNumber(s string, nrCPUs int) (int, error) {
	if s == "N" {
		if nrCPUs <= 0 {
			return 0, fmt.Errorf(`"N" (the last CPU) needs machine.cpus`)
		}
		return nrCPUs - 1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || s == "" || s[0] == '+' || s[0] == '-' {
		return 0, fmt.Errorf("%q is not a CPU number", s)
	}
	if n >= MaxCPUs {
		return 0, fmt.Errorf("CPU %d is beyond the kernel's limit of %d CPUs", n, MaxCPUs)
	}
	if nrCPUs > 0 && n >= nrCPUs {
		return 0, fmt.Errorf("CPU %d is outside the machine (machine.cpus: %d, CPUs 0-%d)", n, nrCPUs, nrCPUs-1)
	}
	return n, nil
}

// String formats the set as a kernel cpulist.
func (c CPUs) String() string {
	var b strings.Builder
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j == i {
			fmt.Fprintf(&b, "%d", c[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", c[i], c[j])
		}
		i = j + 1
	}
	return b.String()
}

// Contains reports whether cpu is in the set.
func (c CPUs) Contains(cpu int) bool {
	i := sort.SearchInts(c, cpu)
	return i < len(c) && c[i] == cpu
}

// Intersect returns the CPUs in both sets.
func (c CPUs) Intersect(o CPUs) CPUs {
	var out CPUs
	for _, x := range c {
		if o.Contains(x) {
			out = append(out, x)
		}
	}
	return out
}

// Minus returns the CPUs of c that are not in o.
func (c CPUs) Minus(o CPUs) CPUs {
	var out CPUs
	for _, x := range c {
		if !o.Contains(x) {
			out = append(out, x)
		}
	}
	return out
}

// Max returns the highest CPU, or -1 for an empty set.
func (c CPUs) Max() int {
	if len(c) == 0 {
		return -1
	}
	return c[len(c)-1]
}

// BootParams is the isolation part of a kernel command line, parsed.
type BootParams struct {
	// NohzFull, IsolCPUs, RCUNocbs, IRQAffinity and KthreadCPUs are the
	// CPU lists of those parameters; nil when the parameter is absent.
	NohzFull    CPUs
	IsolCPUs    CPUs
	RCUNocbs    CPUs
	IRQAffinity CPUs
	KthreadCPUs CPUs
	// IsolFlags are isolcpus's flags (nohz, domain, managed_irq).
	IsolFlags []string
	// Params are all parameters in order, with their offsets in the line.
	Params []BootParam
}

// BootParam is one "name=value" (or bare "name") of a command line.
type BootParam struct {
	Name, Value string
	Offset      int // byte offset of Name in the command line
}

// cpuListParams are the parameters whose value is (or ends in) a cpulist.
var cpuListParams = map[string]bool{
	"nohz_full": true, "isolcpus": true, "rcu_nocbs": true, "irqaffinity": true, "kthread_cpus": true,
}

var isolcpusFlags = map[string]bool{"nohz": true, "domain": true, "managed_irq": true}

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
		word := strings.ReplaceAll(line[start:i], `"`, "")
		name, value, _ := strings.Cut(word, "=")
		out = append(out, BootParam{Name: name, Value: value, Offset: start})
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
	{
		if !cpuListParams[p.Name] {
			return nil
		}
		valueOff := p.Offset + len(p.Name) + 1
		list := p.Value
		if p.Name == "isolcpus" {
			var flags []string
			for {
				flag, rest, more := strings.Cut(list, ",")
				if flag == "" || (flag[0] >= '0' && flag[0] <= '9') || flag == "all" || flag == "N" {
					break
				}
				if !isolcpusFlags[flag] {
					return &BootParamError{p.Name, valueOff, fmt.Errorf("unknown flag %q (isolcpus takes nohz, domain, managed_irq, then a CPU list)", flag)}
				}
				flags = append(flags, flag)
				if !more {
					list = ""
					break
				}
				valueOff += len(flag) + 1
				list = rest
			}
			bp.IsolFlags = flags
		}
		if list == "" {
			if p.Name == "rcu_nocbs" {
				// A bare rcu_nocbs (6.0+) offloads every CPU.
				bp.RCUNocbs = allCPUs(nrCPUs)
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
			bp.NohzFull = cpus
		case "isolcpus":
			bp.IsolCPUs = cpus
		case "rcu_nocbs":
			bp.RCUNocbs = cpus
		case "irqaffinity":
			bp.IRQAffinity = cpus
		case "kthread_cpus":
			bp.KthreadCPUs = cpus
		}
	}
	return nil
}

func allCPUs(n int) CPUs {
	out := make(CPUs, 0, n)
	for c := 0; c < n; c++ {
		out = append(out, c)
	}
	return out
}

// isolcpusDomain reports whether isolcpus takes the CPUs out of the
// scheduler domains: with the domain flag, or with no flags at all.
func (bp *BootParams) isolcpusDomain() bool {
	if bp.IsolCPUs == nil {
		return false
	}
	if len(bp.IsolFlags) == 0 {
		return true
	}
	for _, f := range bp.IsolFlags {
		if f == "domain" {
			return true
		}
	}
	return false
}

// Isolated returns the CPUs the command line isolates: those that are both
// nohz_full and isolcpus (domain) when both are given, else those of the
// one given; nil when neither is.
func (bp *BootParams) Isolated() CPUs {
	dom := bp.isolcpusDomain()
	switch {
	case bp.NohzFull != nil && dom:
		return bp.NohzFull.Intersect(bp.IsolCPUs)
	case bp.NohzFull != nil:
		return bp.NohzFull
	case dom:
		return bp.IsolCPUs
	}
	return nil
}

// Get returns the value of the last parameter called name.
func (bp *BootParams) Get(name string) (string, bool) {
	for i := len(bp.Params) - 1; i >= 0; i-- {
		if bp.Params[i].Name == name {
			return bp.Params[i].Value, true
		}
	}
	return "", false
}
