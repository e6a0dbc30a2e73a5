package kbuild

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestADamagedCachedKernelIsBuiltAgain: an artifact whose image was cut
// short (a power loss before the page cache reached the disk), had a byte
// changed, or was written by an older kbisect without checksums is not
// taken from the cache: it is removed, built again, and the log says so.
func TestADamagedCachedKernelIsBuiltAgain(t *testing.T) {
	for name, damage := range map[string]func(t *testing.T, dir string){
		"truncated": func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, "bzImage"), 5); err != nil {
				t.Fatal(err)
			}
		},
		"a byte flipped": func(t *testing.T, dir string) {
			p := filepath.Join(dir, "bzImage")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x20
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"no checksums": func(t *testing.T, dir string) {
			p := filepath.Join(dir, "meta.json")
			var m map[string]any
			b, _ := os.ReadFile(p)
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			delete(m, "files")
			b, _ = json.Marshal(m)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			tree, commits := fakeTree(t)
			o := buildOptions(t, tree)
			var log strings.Builder
			o.Log = &log
			ctx := context.Background()
			a, err := Build(ctx, o, 0, commits[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := Check(a.Dir); err != nil {
				t.Fatalf("a fresh artifact: %v", err)
			}
			image, _ := os.ReadFile(filepath.Join(a.Dir, "bzImage"))
			if a.Files["bzImage"].Size != int64(len(image)) || len(a.Files) != 5 {
				t.Errorf("meta.json records %+v", a.Files)
			}
			damage(t, a.Dir)
			var de *DamagedError
			if err := Check(a.Dir); !errors.As(err, &de) {
				t.Fatalf("Check of the damaged artifact: %v", err)
			}
			log.Reset()
			b, err := Build(ctx, o, 0, commits[0])
			if err != nil {
				t.Fatal(err)
			}
			if b.Cached || b.Dir != a.Dir {
				t.Errorf("the damaged artifact was used: cached %v, %s", b.Cached, b.Dir)
			}
			if got, _ := os.ReadFile(filepath.Join(b.Dir, "bzImage")); !bytes.Equal(got, image) {
				t.Errorf("the image built again is %d bytes, not the %d of the first build", len(got), len(image))
			}
			if err := Check(b.Dir); err != nil {
				t.Errorf("the artifact built again: %v", err)
			}
			if want := "kbisect: cache: " + de.Error() + ": removed, building it again\n"; !strings.Contains(log.String(), want) {
				t.Errorf("the log does not say %q:\n%s", want, log.String())
			}
			if c, err := Build(ctx, o, 1, commits[0]); err != nil || !c.Cached {
				t.Errorf("then from the cache: %+v %v", c, err)
			}
		})
	}
}

// TestStaleTemporaryFilesAreSwept: what a killed kbisect left in the
// cache (an index entry, artifact directories it was writing, with or
// without a meta.json's temporary file) is removed by the next build;
// what is being written now (a concurrent builder's) and the cache's own
// files, however old, are left alone.
func TestStaleTemporaryFilesAreSwept(t *testing.T) {
	tree, commits := fakeTree(t)
	o := buildOptions(t, tree)
	var log strings.Builder
	o.Log = &log
	ctx := context.Background()
	a, err := Build(ctx, o, 0, commits[0])
	if err != nil {
		t.Fatal(err)
	}
	inputs := filepath.Join(o.CacheDir, "inputs")
	arts := filepath.Join(o.CacheDir, "artifacts")
	index, _ := filepath.Glob(filepath.Join(inputs, "*"))
	old := time.Now().Add(-2 * time.Hour)
	stale := []string{
		filepath.Join(inputs, ".0123abcd.tmp"),
		filepath.Join(inputs, ".0123abcd.4294967"),
		filepath.Join(inputs, ".0123abcd.kbisect-tmp42"),
		filepath.Join(arts, "fedcba98.tmp", "bzImage"),
		filepath.Join(arts, "89abcdef", ".meta.json.81726354"),
		filepath.Join(arts, "01234567", "meta.json.tmp"),
	}
	fresh := []string{
		filepath.Join(inputs, ".4567cdef.1234"),
		filepath.Join(arts, "76543210.tmp", "bzImage"),
		filepath.Join(arts, "fedcba98", ".meta.json.8172"),
	}
	for _, p := range append(append([]string{}, stale...), fresh...) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("half"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range append(append([]string{}, stale...), filepath.Join(arts, "fedcba98.tmp"), filepath.Join(arts, "89abcdef"), filepath.Join(arts, "01234567")) {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// Old but the cache's own: never swept.
	for _, p := range append(index, filepath.Join(a.Dir, "bzImage")) {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	log.Reset()
	b, err := Build(ctx, o, 0, commits[0])
	if err != nil || !b.Cached {
		t.Fatalf("cache hit: %+v %v", b, err)
	}
	for _, p := range stale {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is left: %v", p, err)
		}
	}
	for _, p := range append(append(fresh, index...), filepath.Join(a.Dir, "bzImage")) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	if want := "kbisect: cache: removed " + filepath.Join(arts, "fedcba98.tmp") + ", left by a kbisect that was killed\n"; !strings.Contains(log.String(), want) {
		t.Errorf("the log does not say %q:\n%s", want, log.String())
	}
}

// TestASlotsTemporaryConfigIsSwept: the .config a killed kbisect was
// rewriting in a slot is removed when the slot is next locked, however
// new: no one else writes in a locked slot.
func TestASlotsTemporaryConfigIsSwept(t *testing.T) {
	tree, commits := fakeTree(t, map[string]string{"kernel/Kconfig.hz": "config HZ_100\n\tbool \"100 HZ\"\n"})
	o := buildOptions(t, tree)
	ctx := context.Background()
	if _, err := Build(ctx, o, 0, commits[0]); err != nil {
		t.Fatal(err)
	}
	outs, _ := filepath.Glob(filepath.Join(o.CacheDir, "slots", "*", "slot-0", "out"))
	if len(outs) != 1 {
		t.Fatalf("slot 0: %v", outs)
	}
	tmp := filepath.Join(outs[0], ".config"+tempSuffix)
	if err := os.WriteFile(tmp, []byte("CONFIG_HALF=y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(ctx, o, 0, commits[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("%s is left: %v", tmp, err)
	}
}

// BenchmarkSweep measures what every build pays to look for a killed
// kbisect's temporary files in a cache of 500 artifacts.
func BenchmarkSweep(b *testing.B) {
	o := Options{CacheDir: b.TempDir()}
	for i := 0; i < 500; i++ {
		dir := filepath.Join(o.CacheDir, "artifacts", fmt.Sprintf("%032x", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for _, name := range []string{"bzImage", "System.map", "config", "kernel.release", "modules.tar", "meta.json"} {
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := 0; i < b.N; i++ {
		if removed := o.sweep(); len(removed) != 0 {
			b.Fatal(removed)
		}
	}
}

// BenchmarkCheck measures the check of an artifact with a 32 MB image,
// what a cache hit and every install pay.
func BenchmarkCheck(b *testing.B) {
	dir := b.TempDir()
	image := make([]byte, 32<<20)
	if _, err := rand.Read(image); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bzImage"), image, 0o644); err != nil {
		b.Fatal(err)
	}
	sums, err := sumFiles(dir)
	if err != nil {
		b.Fatal(err)
	}
	if err := writeMeta(dir, &Artifact{Files: sums}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(image)))
	for i := 0; i < b.N; i++ {
		if err := Check(dir); err != nil {
			b.Fatal(err)
		}
	}
}
