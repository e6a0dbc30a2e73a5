package kbuild

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"kbisect/internal/commitid"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func buildOptions(t *testing.T, tree string) Options {
	t.Helper()
	frag := filepath.Join(t.TempDir(), "rt.config")
	if err := os.WriteFile(frag, []byte("CONFIG_EXPERT=y\nCONFIG_PREEMPT_RT=y\nCONFIG_NO_HZ_FULL=y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return Options{Tree: tree, Base: "tinyconfig", Fragments: []string{frag}, Jobs: 2, CacheDir: t.TempDir()}
}

func compiled(t *testing.T, o Options, slot int) []string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(o.CacheDir, "slots", "*", "slot-"+string(rune('0'+slot)), "out", "compiled.log"))
	if len(matches) != 1 {
		t.Fatalf("compile log: %v", matches)
	}
	b, _ := os.ReadFile(matches[0])
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	_ = os.WriteFile(matches[0], nil, 0o644)
	return lines
}

// eventpollTree is a fake tree of two commits, the second changing
// kernel/eventpoll.c alone, and the first built in slot 0.
func eventpollTree(t *testing.T) (tree string, commits []string, o Options, first *Artifact) {
	t.Helper()
	tree, commits = fakeTree(t, map[string]string{"kernel/eventpoll.c": "int ep_poll_callback(void) { return 2; }\n"})
	o = buildOptions(t, tree)
	first, err := Build(context.Background(), o, 0, commits[0])
	if err != nil {
		t.Fatal(err)
	}
	return tree, commits, o, first
}

func TestASlotRebuildsOnlyWhatTheNextCommitChanged(t *testing.T) {
	tree, commits, o, a := eventpollTree(t)
	ctx := context.Background()
	if len(compiled(t, o, 0)) != 3 {
		t.Error("the first build did not compile the three files")
	}
	want := "6.12.117" + LocalVersion(commits[0])
	if a.Release != want || a.Cached {
		t.Errorf("release %q cached %v, want %q", a.Release, a.Cached, want)
	}
	for _, f := range []string{"bzImage", "System.map", "config", "kernel.release", "modules.tar", "meta.json"} {
		if _, err := os.Stat(filepath.Join(a.Dir, f)); err != nil {
			t.Errorf("artifact lacks %s: %v", f, err)
		}
	}
	// The modules as installed, without the build symlink into the slot.
	if got := tarEntries(t, filepath.Join(a.Dir, "modules.tar")); got != "kernel/ root 0755; kernel/ext4.ko root 0644 module\n" {
		t.Errorf("modules.tar holds %q", got)
	}
	b, err := Build(ctx, o, 0, commits[1])
	if err != nil {
		t.Fatal(err)
	}
	if got := compiled(t, o, 0); len(got) != 1 || !strings.HasSuffix(got[0], "kernel/eventpoll.c") {
		t.Errorf("the second commit compiled %v, want only eventpoll.c", got)
	}
	if a.Signature == b.Signature {
		t.Error("different code, same signature")
	}
	// The user's own checkout was never touched.
	if out, _ := git(ctx, tree, "status", "--porcelain"); strings.TrimSpace(out) != "" {
		t.Errorf("the user's tree changed: %s", out)
	}
}

func TestTheSameCommitComesFromTheCache(t *testing.T) {
	tree, commits := fakeTree(t)
	o := buildOptions(t, tree)
	a, err := Build(context.Background(), o, 0, commits[0])
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b, err := Build(context.Background(), o, 1, commits[0])
	if err != nil {
		t.Fatal(err)
	}
	if !b.Cached || b.Dir != a.Dir || b.Signature != a.Signature {
		t.Errorf("second build %+v", b)
	}
	// Found from its inputs: slot 1 was not even made.
	if m, _ := filepath.Glob(filepath.Join(o.CacheDir, "slots", "*", "slot-1")); len(m) != 0 {
		t.Errorf("a cache hit made a slot: %v", m)
	}
	t.Logf("cache hit in %v", time.Since(start))
}

func TestTheSameCodeHasTheSameSignatureWhateverItsCommit(t *testing.T) {
	tree, commits := fakeTree(t, map[string]string{"README": "a documentation change\n"})
	o := buildOptions(t, tree)
	a, err := Build(context.Background(), o, 0, commits[0])
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(context.Background(), o, 0, commits[1])
	if err != nil {
		t.Fatal(err)
	}
	if a.Signature != b.Signature || a.Release == b.Release {
		t.Errorf("signatures %s %s, releases %s %s", a.Signature, b.Signature, a.Release, b.Release)
	}
}

func TestADroppedOptionFailsTheBuildWithItsReason(t *testing.T) {
	tree, commits := fakeTree(t)
	o := buildOptions(t, tree)
	if err := os.WriteFile(o.Fragments[0], []byte("CONFIG_PREEMPT_RT=y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Build(context.Background(), o, 0, commits[0])
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Dropped) != 1 || !strings.Contains(err.Error(), "CONFIG_PREEMPT_RT=y was dropped (CONFIG_PREEMPT_RT not set; asked by "+o.Fragments[0]+":1): depends on EXPERT && ARCH_SUPPORTS_RT, and CONFIG_EXPERT is not set") {
		t.Errorf("got %v", err)
	}
}

func TestACommitThatDoesNotCompileIsABuildFailure(t *testing.T) {
	tree, commits := fakeTree(t, map[string]string{"kernel/helper.c": "int helper(void) { return 0 }\n"})
	o := buildOptions(t, tree)
	_, err := Build(context.Background(), o, 0, commits[1])
	var be *BuildError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "helper.c:1:28: error: expected") {
		t.Errorf("got %T %v", err, err)
	}
}

func TestMissingToolsAreTheMachinesProblem(t *testing.T) {
	for log, want := range map[string]string{
		"scripts/Makefile: /bin/sh: 1: flex: not found":                         "a build tool is missing: Debian: apt-get install flex bison bc perl",
		"fatal error: gelf.h: No such file or directory":                        "libelf is missing: Debian: apt-get install libelf-dev",
		"cc1: out of memory: Killed signal terminated program cc1":              "the compiler ran out of memory: lower build.jobs",
		"/usr/bin/ld: final link failed: No space left on device":               "the disk is full",
		"BTF: .tmp_vmlinux.btf: pahole (pahole) is not available":               "pahole is missing for CONFIG_DEBUG_INFO_BTF",
		"kernel/gen_kheaders.sh: line 84: cpio: command not found":              "a build tool is missing: Debian: apt-get install cpio",
		"kernel/fork.c:12:1: error: unknown type name 'foo'\nmake: *** Error 1": "",
	} {
		err := classify(errors.New("make failed"), "0123456789abcdef", log, buildFacts{})
		var se *SetupError
		if want == "" {
			var be *BuildError
			if !errors.As(err, &be) {
				t.Errorf("%q: got %v", log, err)
			}
			continue
		}
		if !errors.As(err, &se) || !strings.HasPrefix(se.Msg, want) {
			t.Errorf("%q: got %v", log, err)
		}
	}
}

func TestACancelledBuildStopsMake(t *testing.T) {
	tree, commits := fakeTree(t, map[string]string{"kernel/slow.c": "int slow(void) { return 3; }\n"})
	o := buildOptions(t, tree)
	o.MakeVars = map[string]string{"CC": "sleep 60; gcc"} // unused by the fake Makefile's gcc lines
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Build(ctx, o, 0, commits[1])
	if err == nil || time.Since(start) > 30*time.Second {
		t.Errorf("got %v after %v", err, time.Since(start))
	}
}

// TestTheCacheKeepsWhatWasUsedLast: with room for two artifacts, the third
// build evicts the one used least recently, and a cache hit counts as a
// use.
func TestTheCacheKeepsWhatWasUsedLast(t *testing.T) {
	tree, commits := fakeTree(t,
		map[string]string{"kernel/eventpoll.c": "int ep_poll_callback(void) { return 2; }\n"},
		map[string]string{"kernel/eventpoll.c": "int ep_poll_callback(void) { return 3; }\n"})
	o := buildOptions(t, tree)
	ctx := context.Background()
	var log strings.Builder
	o.Log = &log
	a, err := Build(ctx, o, 0, commits[0])
	if err != nil {
		t.Fatal(err)
	}
	size := du(a.Dir)
	o.CacheSize = 2*size + size/2
	b, err := Build(ctx, o, 0, commits[1])
	if err != nil {
		t.Fatal(err)
	}
	// Use the first again: now the second is the least recently used.
	old := time.Now().Add(-time.Minute)
	_ = os.Chtimes(filepath.Join(a.Dir, "meta.json"), old, old)
	_ = os.Chtimes(filepath.Join(b.Dir, "meta.json"), old, old)
	if hit, err := Build(ctx, o, 0, commits[0]); err != nil || !hit.Cached {
		t.Fatalf("cache hit: %+v %v", hit, err)
	}
	c, err := Build(ctx, o, 0, commits[2])
	if err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]bool{a.Dir: true, b.Dir: false, c.Dir: true} {
		if _, err := os.Stat(filepath.Join(dir, "meta.json")); (err == nil) != want {
			t.Errorf("%s kept = %v, want %v", filepath.Base(dir), err == nil, want)
		}
	}
	if !strings.Contains(log.String(), "kbisect: cache: evicted "+b.Dir+"\n") {
		t.Errorf("the log does not say what was evicted:\n%s", log.String())
	}
	if !strings.Contains(log.String(), "kbisect: ccache: not used, build.ccache is false\n") {
		t.Errorf("the log does not say whether ccache was used")
	}
}

// tarEntries lists a tarball: name, owner, mode and, for files, content.
func tarEntries(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		e := fmt.Sprintf("%s %s %04o", hdr.Name, hdr.Uname, hdr.Mode&0o7777)
		if hdr.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			e += " " + string(b)
		}
		out = append(out, e)
	}
	return strings.Join(out, "; ")
}

// TestASlotReconfiguresOnlyWhenKconfigChanged: a commit that changes no
// Kconfig file keeps the slot's .config (its CONFIG_LOCALVERSION set)
// without the make runs; one that changes a Kconfig file is configured
// again.
func TestASlotReconfiguresOnlyWhenKconfigChanged(t *testing.T) {
	tree, commits := fakeTree(t,
		map[string]string{"kernel/eventpoll.c": "int ep_poll_callback(void) { return 2; }\n"},
		map[string]string{"kernel/Kconfig.hz": "config HZ_100\n\tbool \"100 HZ\"\n"})
	o := buildOptions(t, tree)
	var log strings.Builder
	o.Log = &log
	ctx := context.Background()
	for i, want := range []bool{false, true, false} {
		log.Reset()
		a, err := Build(ctx, o, 0, commits[i])
		if err != nil {
			t.Fatal(err)
		}
		reused := strings.Contains(log.String(), "kbisect: config: the one of "+commitid.Short(commits[max(i-1, 0)]))
		if reused != want {
			t.Errorf("commit %d: configuration reused %v, want %v:\n%s", i, reused, want, log.String())
		}
		if a.Release != "6.12.117"+LocalVersion(commits[i]) {
			t.Errorf("commit %d: release %s", i, a.Release)
		}
		cfg, _ := ReadConfigFile(filepath.Join(a.Dir, "config"))
		if cfg.Get("CONFIG_PREEMPT_RT") != "y" || cfg.Get("CONFIG_LOCALVERSION") != `"`+LocalVersion(commits[i])+`"` {
			t.Errorf("commit %d: config PREEMPT_RT=%s LOCALVERSION=%s", i, cfg.Get("CONFIG_PREEMPT_RT"), cfg.Get("CONFIG_LOCALVERSION"))
		}
	}
}
