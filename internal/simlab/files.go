package simlab

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"kbisect/internal/simhost"
)

// Makefile is the simulated tree's top Makefile: it answers the targets
// kbisect's kbuild runs as the kernel's Kbuild does, with O=: defconfig,
// tinyconfig and allnoconfig write a complete .config, olddefconfig
// applies the tree's Kconfig (it drops CONFIG_PREEMPT_RT=y without
// CONFIG_EXPERT=y, as Kconfig does) and writes
// include/config/kernel.release (VERSION, CONFIG_LOCALVERSION,
// $(LOCALVERSION)); bzImage compiles every C file of the tree with gcc,
// each only when it changed, into a real ELF vmlinux (copied to
// arch/x86/boot/bzImage) and writes System.map; modules and
// modules_install (INSTALL_MOD_PATH) install one module. Its version is
// 6.12.117; a generated tree sets its own SUBLEVEL.
//
//go:embed tree/Makefile
var Makefile string

//go:embed tree
var treeFS embed.FS

// BuildFiles returns the files of the simulated tree's build system by
// path: the Makefile, the Kconfig files and scripts/kconfig. Adding C
// files makes a tree that kbisect's kbuild builds.
func BuildFiles() map[string]string {
	out := map[string]string{}
	// The embedded files are part of the binary: reading them cannot fail.
	_ = fs.WalkDir(treeFS, "tree", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := treeFS.ReadFile(p)
		out[strings.TrimPrefix(p, "tree/")] = string(b)
		return err
	})
	return out
}

// withSublevel is the Makefile of version 6.12.<sublevel>.
func withSublevel(sublevel int) string {
	return strings.Replace(Makefile, "\nSUBLEVEL = 117\n", fmt.Sprintf("\nSUBLEVEL = %d\n", sublevel), 1)
}

// Source files of the simulated kernel: each C file starts as one
// function (init/main.c has main), and commits add functions to them.
var sources = []string{
	"arch/x86/kernel/apic/apic.c",
	"arch/x86/kernel/tsc.c",
	"block/blk-core.c",
	"drivers/gpu/drm/drm_drv.c",
	"drivers/net/ethernet/intel/ice/ice_main.c",
	"drivers/tty/serial/8250/8250_core.c",
	"fs/eventpoll.c",
	"fs/ext4/inode.c",
	"fs/read_write.c",
	"init/main.c",
	"kernel/irq/manage.c",
	"kernel/rcu/tree.c",
	"kernel/sched/core.c",
	"kernel/time/tick-sched.c",
	"kernel/trace/trace_osnoise.c",
	"kernel/workqueue.c",
	"lib/string.c",
	"mm/page_alloc.c",
	"mm/slub.c",
	"net/core/dev.c",
	"net/ipv4/tcp.c",
}

// docs are the files documentation-only commits change.
var docs = []string{
	"Documentation/admin-guide/kernel-parameters.txt",
	"Documentation/filesystems/proc.rst",
	"Documentation/scheduler/sched-deadline.rst",
	"Documentation/timers/no_hz.rst",
	"Documentation/trace/osnoise-tracer.rst",
	"MAINTAINERS",
}

// eventpoll is the file whose noise line the regression changes.
const eventpoll = "fs/eventpoll.c"

// area is what a commit subject calls a file: "sched/core", "ice",
// "eventpoll", "Documentation: no_hz".
func area(path string) string {
	base := strings.TrimSuffix(path[strings.LastIndexByte(path, '/')+1:], ".c")
	switch {
	case strings.HasPrefix(path, "Documentation/"):
		return "Documentation: " + strings.TrimSuffix(strings.TrimSuffix(base, ".rst"), ".txt")
	case path == "MAINTAINERS":
		return "MAINTAINERS"
	case strings.HasPrefix(path, "kernel/"), strings.HasPrefix(path, "mm/"), strings.HasPrefix(path, "net/"):
		dir := path[:strings.LastIndexByte(path, '/')]
		dir = strings.TrimPrefix(dir, "kernel")
		dir = strings.TrimPrefix(dir, "/")
		if dir == "" {
			return base
		}
		return dir + "/" + base
	case strings.HasPrefix(path, "drivers/"):
		parts := strings.Split(path, "/")
		return parts[len(parts)-2]
	case strings.HasPrefix(path, "arch/x86/"):
		return "x86/" + base
	case strings.HasPrefix(path, "fs/ext4/"):
		return "ext4"
	case strings.HasPrefix(path, "init/"):
		return "init"
	}
	return base
}

// symbol makes a C identifier of a path: fs/eventpoll.c → fs_eventpoll.
func symbol(path string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.TrimSuffix(path, ".c"))
}

// line is what one commit adds to one file; broken lines do not compile
// until their fix is in.
type line struct {
	commit int
	text   string
	fixed  string // the text once the fix is in ("" : never broken)
	fix    int    // the commit that fixes it
	// top puts the text under the file's head, away from the lines later
	// commits add at the end, so that it reverts cleanly on them as a
	// change in the middle of a real file does.
	top bool
}

// fileContent renders a file of a commit whose ancestors are anc: the
// file's head, then every line added by an ancestor, in commit order.
func fileContent(path string, lines []line, has func(int) bool, noise string) string {
	var b strings.Builder
	switch {
	case strings.HasSuffix(path, ".c"):
		fmt.Fprintf(&b, "// SPDX-License-Identifier: GPL-2.0-only\n/*\n * %s, kbisect's simulated kernel\n */\n", path)
		switch path {
		case "init/main.c":
			b.WriteString("\nint main(void)\n{\n\treturn 0;\n}\n")
		case eventpoll:
			fmt.Fprintf(&b, "\n/* The noise this kernel makes on isolated CPUs, read by the simulated lab host. */\nconst char ep_sim_noise[] = %q;\n", simhost.NoiseMarker+noise)
			for _, l := range lines {
				if l.top && has(l.commit) {
					b.WriteString(l.text)
				}
			}
			fallthrough
		default:
			fmt.Fprintf(&b, "\nint %s_init(void)\n{\n\treturn 0;\n}\n", symbol(path))
		}
	default:
		fmt.Fprintf(&b, "%s\n%s\n\n", path, strings.Repeat("=", len(path)))
	}
	for _, l := range lines {
		if !has(l.commit) || l.top {
			continue
		}
		text := l.text
		if l.fixed != "" && has(l.fix) {
			text = l.fixed
		}
		b.WriteString(text)
	}
	return b.String()
}

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[string][]line) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
