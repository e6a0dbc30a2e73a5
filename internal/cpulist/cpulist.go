// Package cpulist writes a set of CPUs as the kernel writes a cpulist
// ("1-16,33-48"), for the job file's CPUs and the workloads' command
// lines alike. It imports no kbisect package.
package cpulist

import (
	"fmt"
	"strings"
)

// Format writes cpus, which are sorted and without repeats, as ranges.
func Format(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j == i {
			fmt.Fprintf(&b, "%d", cpus[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", cpus[i], cpus[j])
		}
		i = j + 1
	}
	return b.String()
}
