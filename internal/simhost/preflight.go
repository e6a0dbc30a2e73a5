package simhost

import (
	"fmt"
	"io"
	"strings"
)

// preflight answers remote's preflight as a ready lab host does: root,
// every program asked for installed, room in /boot and /lib/modules,
// grub set up for one-shot entries, kexec allowed, tracefs mounted, and
// the machine's CPUs all online.
func (h *Host) preflight(programs string, stdout io.Writer) int {
	h.mu.Lock()
	cpus := h.cpus
	h.mu.Unlock()
	fmt.Fprintf(stdout, "uid=0\npresent=0-%d\nonline=0-%d\n", cpus-1, cpus-1)
	for _, p := range strings.Fields(programs) {
		fmt.Fprintf(stdout, "have=%s\n", p)
	}
	fmt.Fprint(stdout, `boot_writable=yes
boot_free_kb=1048576
modules_writable=yes
modules_free_kb=20971520
grub_default=saved
grub_cfg=/boot/grub/grub.cfg
grub_next_entry=yes
kexec_load_disabled=0
lockdown=[none] integrity confidentiality
tracefs=/sys/kernel/tracing
tracefs_mountpoint=yes
`)
	return 0
}
