package kbuild

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRealKernelBuildsAndRebuildsOneFile builds a real 6.12 PREEMPT_RT
// kernel: Debian's linux-source-6.12 in a scratch git repository,
// tinyconfig plus the project's fragments; then a second commit that
// edits fs/eventpoll.c, built in the same slot. Heavy: KBISECT_E2E=1
// (just e2e-build). KBISECT_E2E_TREE reuses an unpacked tree (a git
// repository of the source) between runs.
func TestRealKernelBuildsAndRebuildsOneFile(t *testing.T) {
	if os.Getenv("KBISECT_E2E") == "" {
		t.Skip("a real kernel build: set KBISECT_E2E=1 (just e2e-build)")
	}
	tree := os.Getenv("KBISECT_E2E_TREE")
	if tree == "" {
		tree = unpackLinuxSource(t)
	}
	// A cache of ccache's own, so the cold build is cold.
	t.Setenv("CCACHE_DIR", filepath.Join(t.TempDir(), "ccache"))
	ctx := context.Background()
	base, err := git(ctx, tree, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	base = strings.TrimSpace(base)
	o := Options{Tree: tree, Base: "tinyconfig", CCache: true, CacheDir: t.TempDir(),
		Fragments: []string{"../configs/fragments/preempt-rt.config", "../configs/fragments/qemu-guest.config"}}
	start := time.Now()
	a, err := Build(ctx, o, 0, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cold build: %.0f s, %s, ccache %v, phases %v", time.Since(start).Seconds(), a.Release, a.CCache, a.Phases)
	final, err := ReadConfigFile(filepath.Join(a.Dir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	for _, opt := range []string{"CONFIG_PREEMPT_RT", "CONFIG_NO_HZ_FULL", "CONFIG_OSNOISE_TRACER"} {
		if final.Get(opt) != "y" {
			t.Errorf("%s = %s", opt, final.Get(opt))
		}
	}

	// A second commit that edits one file, built in the same slot.
	work := t.TempDir()
	if _, err := git(ctx, tree, "worktree", "add", "--detach", work, base); err != nil {
		t.Fatal(err)
	}
	defer git(ctx, tree, "worktree", "remove", "--force", work)
	ep := filepath.Join(work, "fs", "eventpoll.c")
	src, err := os.ReadFile(ep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ep, append(src, []byte("\n/* kbisect e2e: a one-line change */\nint kbisect_e2e_marker;\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	c := exec.Command("git", "-C", work, "-c", "user.email=e2e@kbisect", "-c", "user.name=e2e", "commit", "-q", "-am", "eventpoll: a one-line change")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	next, _ := git(ctx, work, "rev-parse", "HEAD")
	start = time.Now()
	b, err := Build(ctx, o, 0, strings.TrimSpace(next))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("one-file rebuild: %.1f s (%s), phases %v", time.Since(start).Seconds(), b.Release, b.Phases)
	// What make rebuilt: the objects written since the step began. One
	// changed .c file relinks vmlinux but must not recompile the world.
	var rebuilt []string
	outs, _ := filepath.Glob(filepath.Join(o.CacheDir, "slots", "*", "slot-0", "out"))
	if len(outs) != 1 {
		t.Fatalf("slot 0's output directory: %v", outs)
	}
	filepath.WalkDir(outs[0], func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".o") {
			if fi, err := d.Info(); err == nil && fi.ModTime().After(start) {
				rebuilt = append(rebuilt, strings.TrimPrefix(p, outs[0]+"/"))
			}
		}
		return nil
	})
	t.Logf("objects written by the one-file step: %d %v", len(rebuilt), rebuilt)
	if len(rebuilt) > 30 || !slices.Contains(rebuilt, "fs/eventpoll.o") {
		t.Errorf("a one-file commit wrote %d objects: %v", len(rebuilt), rebuilt)
	}
	if a.Signature == b.Signature {
		t.Error("eventpoll.c changed but the signature did not")
	}
	start = time.Now()
	c2, err := Build(ctx, o, 1, strings.TrimSpace(next))
	if err != nil || !c2.Cached {
		t.Fatalf("cache: %+v %v", c2, err)
	}
	t.Logf("cache hit: %.2f s", time.Since(start).Seconds())
}

// unpackLinuxSource unpacks Debian's linux-source-6.12 into a git
// repository (its .gitignore ignores the top level, hence add -f).
func unpackLinuxSource(t *testing.T) string {
	t.Helper()
	tarball := "/usr/src/linux-source-6.12.tar.xz"
	if _, err := os.Stat(tarball); err != nil {
		t.Fatalf("%v: apt-get install linux-source-6.12", err)
	}
	dir := t.TempDir()
	for _, argv := range [][]string{
		{"tar", "-C", dir, "-xf", tarball},
		{"git", "-C", filepath.Join(dir, "linux-source-6.12"), "init", "-q"},
		{"git", "-C", filepath.Join(dir, "linux-source-6.12"), "add", "-f", "-A", "."},
		{"git", "-C", filepath.Join(dir, "linux-source-6.12"), "-c", "user.email=e2e@kbisect", "-c", "user.name=e2e", "commit", "-q", "-m", "linux-source-6.12"},
	} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", argv, err, out)
		}
	}
	return filepath.Join(dir, "linux-source-6.12")
}
