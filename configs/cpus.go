package configs

import (
	"fmt"
	"kbisect/internal/cpulist"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// allCPUs returns CPUs 0 to n-1.
func allCPUs(n int) CPUs {
	out := make(CPUs, 0, n)
	for c := 0; c < n; c++ {
		out = append(out, c)
	}
	return out
}

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
	parts := strings.Split(s, ",")
	for i, part := range parts {
		if strings.TrimSpace(part) == "" && (i == 0 || i == len(parts)-1) && len(parts) > 1 {
			off += len(part) + 1
			continue // the kernel accepts a leading or trailing comma
		}
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
	rng, group, hasGroup := strings.Cut(part, ":")
	var a, b int
	lo, hi, isRange := strings.Cut(rng, "-")
	if strings.EqualFold(rng, "all") {
		if nrCPUs <= 0 {
			return fmt.Errorf(`"all" needs machine.cpus`)
		}
		a, b, isRange = 0, nrCPUs-1, true
	} else {
		var err error
		if a, err = cpuNumber(lo, nrCPUs); err != nil {
			return err
		}
		b = a
	}
	if isRange && !strings.EqualFold(rng, "all") {
		var err error
		if b, err = cpuNumber(hi, nrCPUs); err != nil {
			return err
		}
		if b < a {
			return fmt.Errorf("CPU range %s runs backwards", rng)
		}
	}
	used, size := 1, 1
	if hasGroup {
		if !isRange {
			return fmt.Errorf("CPU group %q needs a range (write A-B:used/group, e.g. 0-63:1/2)", part)
		}
		u, g, ok := strings.Cut(group, "/")
		var err error
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
		return 0, outsideMachine(n, nrCPUs)
	}
	return n, nil
}

// outsideMachine is the error for a CPU the machine does not have.
func outsideMachine(cpu, nrCPUs int) error {
	return fmt.Errorf("CPU %d is outside the machine (machine.cpus: %d, CPUs 0-%d)", cpu, nrCPUs, nrCPUs-1)
}

// String formats the set as a kernel cpulist.
func (c CPUs) String() string { return cpulist.Format(c) }

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

// cpuList is a CPU list of the job file, parsed by parseCPULists once
// machine.cpus is known.
type cpuList struct {
	key  string
	node *yaml.Node
	set  *CPUs
}

// parseCPULists parses the job's CPU lists against the machine's CPUs.
func (l *loader) parseCPULists() {
	nr := l.job.Machine.CPUs
	if nr < 0 || nr > MaxCPUs {
		nr = 0 // said by validation
	}
	for _, c := range l.cpuLists {
		cpus, err := ParseCPUs(c.node.Value, nr)
		if err != nil {
			p := l.pos(c.node)
			if ce, ok := err.(*cpuError); ok {
				p = l.valuePos(c.node, ce.offset)
			}
			l.badf(p, c.key, "%v", err)
			continue
		}
		*c.set = cpus
	}
}
