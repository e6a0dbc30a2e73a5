package kbuild

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"kbisect/internal/atomicfile"
)

// cached is one artifact of the cache: its directory, its size on disk
// and when it was last built or used.
type cached struct {
	dir  string
	size int64
	used time.Time
}

// touch marks an artifact as used now, so eviction keeps it longest.
func touch(dir string) {
	now := time.Now()
	_ = os.Chtimes(filepath.Join(dir, "meta.json"), now, now)
}

// Evict removes the artifacts used least recently until the cache holds
// at most limit bytes; keep (the artifact just built or used) is never
// removed. Half-written artifacts (no meta.json) older than an hour are
// removed first: a build that was killed leaves them. Temporary
// directories (<key>.<random>.tmp) are a builder's being published,
// perhaps another controller's: sweep removes them once stale. It returns
// the directories it removed.
func Evict(cacheDir string, limit int64, keep string) ([]string, error) {
	root := filepath.Join(cacheDir, "artifacts")
	entries, err := os.ReadDir(root)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var all []cached
	var total int64
	var removed []string
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if !e.IsDir() || dir == keep {
			if dir == keep {
				total += du(dir)
			}
			continue
		}
		meta, err := os.Stat(filepath.Join(dir, "meta.json"))
		if err != nil {
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
				if os.RemoveAll(dir) == nil {
					removed = append(removed, dir)
				}
			}
			continue
		}
		c := cached{dir: dir, size: du(dir), used: meta.ModTime()}
		total += c.size
		all = append(all, c)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].used.Before(all[j].used) })
	for _, c := range all {
		if total <= limit {
			break
		}
		// meta.json goes first: a reader never sees a half-removed
		// artifact as complete.
		if err := os.Remove(filepath.Join(c.dir, "meta.json")); err != nil {
			return removed, err
		}
		if err := os.RemoveAll(c.dir); err != nil {
			return removed, err
		}
		total -= c.size
		removed = append(removed, c.dir)
	}
	return removed, nil
}

// du is the disk usage of a directory tree in bytes.
func du(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// lookup returns the artifact built before from the same inputs, its
// files checked against the sums its build recorded.
func (o Options) lookup(inputs string) *Artifact {
	key, err := os.ReadFile(filepath.Join(o.CacheDir, "inputs", inputs))
	if err != nil {
		return nil
	}
	return o.cachedAt(filepath.Join(o.CacheDir, "artifacts", strings.TrimSpace(string(key))))
}

// cachedAt returns the artifact of dir when it is complete and its files
// are what its build wrote. A damaged one (cut short by a power loss, a
// byte changed on disk, an older kbisect's without checksums) is removed
// from the cache, the log saying so, and the caller builds it again: it
// is never used as the commit's kernel.
func (o Options) cachedAt(dir string) *Artifact {
	a, err := loadArtifact(dir)
	if err != nil {
		return nil // not there, or not complete: built
	}
	var de *DamagedError
	switch err := Check(dir); {
	case errors.As(err, &de):
		what := "removed"
		if err := discard(dir); err != nil {
			what = "could not be removed (" + err.Error() + ")"
		}
		o.logf("cache: %v: %s, building it again", de, what)
		return nil
	case err != nil:
		o.logf("cache: %v: building it again", err)
		return nil
	}
	touch(dir)
	return a
}

// logf writes one kbisect line to the build's log.
func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, "kbisect: "+format+"\n", args...)
	}
}

// remember notes which artifact the inputs built (best effort: without
// it the next build configures to find it).
func (o Options) remember(inputs, key string) {
	dir := filepath.Join(o.CacheDir, "inputs")
	if os.MkdirAll(dir, 0o755) != nil {
		return
	}
	_ = atomicfile.WriteFile(filepath.Join(dir, inputs), []byte(key+"\n"))
}

// writeMeta writes meta.json, the mark of a complete artifact: after the
// files it describes are synced, itself synced and renamed into place.
func writeMeta(dir string, a *Artifact) error {
	return atomicfile.WriteJSON(filepath.Join(dir, "meta.json"), a)
}

// loadArtifact returns the cached artifact of dir, complete only when its
// meta.json (written last) is there.
func loadArtifact(dir string) (*Artifact, error) {
	var a Artifact
	if err := atomicfile.ReadJSON(filepath.Join(dir, "meta.json"), &a); err != nil {
		return nil, err
	}
	a.Dir = dir
	return &a, nil
}

// ArtifactKey is the cache key of the complete artifact in dir, as its
// meta.json says: its name in any kbisect's cache, a build server's too.
func ArtifactKey(dir string) (string, error) {
	a, err := loadArtifact(dir)
	if err != nil {
		return "", err
	}
	if !keyName.MatchString(a.Key) {
		return "", fmt.Errorf("%s: its key %q is not a cache key", dir, a.Key)
	}
	return a.Key, nil
}
