package kbuild

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeMakefile behaves like the kernel's for the targets kbuild uses, with
// O=: config targets, olddefconfig (which drops PREEMPT_RT without
// EXPERT, as Kconfig does), bzImage (a real ELF linked from the tree's C
// files, each compiled only when it changed; like the kernel's build it
// writes include/config/kernel.release from .config), modules and
// modules_install. Every compile is logged, so tests can count them.
const fakeMakefile = `VERSION := 6.12.117
O ?= .
SRCS := $(wildcard $(CURDIR)/kernel/*.c)
OBJS := $(patsubst $(CURDIR)/%.c,$(O)/%.o,$(SRCS))

defconfig tinyconfig:
	mkdir -p $(O)
	printf 'CONFIG_X86_64=y\nCONFIG_ARCH_SUPPORTS_RT=y\nCONFIG_MODULES=y\nCONFIG_SMP=y\nCONFIG_HAVE_CONTEXT_TRACKING_USER=y\n' > $(O)/.config

olddefconfig:
	if grep -q '^CONFIG_PREEMPT_RT=y' $(O)/.config && ! grep -q '^CONFIG_EXPERT=y' $(O)/.config; then \
		sed -i 's/^CONFIG_PREEMPT_RT=y/# CONFIG_PREEMPT_RT is not set/' $(O)/.config; fi
	mkdir -p $(O)/include/config
	lv=$$(sed -n 's/^CONFIG_LOCALVERSION="\(.*\)"/\1/p' $(O)/.config); echo "$(VERSION)$$lv$(LOCALVERSION)" > $(O)/include/config/kernel.release

$(O)/%.o: $(CURDIR)/%.c
	mkdir -p $(dir $@)
	echo "CC $<" >> $(O)/compiled.log
	gcc -c -o $@ $<

bzImage: $(OBJS)
	lv=$$(sed -n 's/^CONFIG_LOCALVERSION="\(.*\)"/\1/p' $(O)/.config); echo "$(VERSION)$$lv$(LOCALVERSION)" > $(O)/include/config/kernel.release
	gcc -o $(O)/vmlinux $(OBJS)
	mkdir -p $(O)/arch/x86/boot
	cp $(O)/vmlinux $(O)/arch/x86/boot/bzImage
	cp $(O)/.config $(O)/System.map

modules:
	echo module > $(O)/ext4.ko

modules_install:
	r=$$(cat $(O)/include/config/kernel.release); mkdir -p $(INSTALL_MOD_PATH)/lib/modules/$$r/kernel; cp $(O)/ext4.ko $(INSTALL_MOD_PATH)/lib/modules/$$r/kernel/; ln -sf $(CURDIR) $(INSTALL_MOD_PATH)/lib/modules/$$r/build
`

// fakeTree makes a git repository with the fake Makefile, the test
// Kconfig files and C files, one commit per entry of changes (file →
// content), and returns its path and the commits.
func fakeTree(t *testing.T, changes ...map[string]string) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) string {
		c := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@kbisect", "-c", "user.name=t"}, args...)...)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q")
	files := map[string]string{"Makefile": fakeMakefile}
	err := filepath.WalkDir("testdata/tree", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		files[strings.TrimPrefix(filepath.ToSlash(p), "testdata/tree/")] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	files["kernel/main.c"] = "int helper(void);\nint main(void) { return helper(); }\n"
	files["kernel/helper.c"] = "int helper(void) { return 0; }\n"
	files["kernel/eventpoll.c"] = "int ep_poll_callback(void) { return 1; }\n"
	var commits []string
	for i, change := range append([]map[string]string{files}, changes...) {
		for name, content := range change {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		run("add", "-A")
		run("commit", "-q", "-m", "commit "+string(rune('0'+i)))
		commits = append(commits, run("rev-parse", "HEAD"))
	}
	return dir, commits
}
