package kbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// FileSum is what the build wrote into one file of an artifact: its size
// and SHA-256, checked again before the artifact is used.
type FileSum struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// DamagedError says an artifact of the cache is not what its build wrote
// (a file cut short by a power loss, a byte changed on disk, a file or
// meta.json gone): it must be built again, it is not the commit's kernel.
type DamagedError struct {
	Dir     string
	File    string // "" when meta.json itself is the problem
	Problem string
}

func (e *DamagedError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("artifact %s: %s", e.Dir, e.Problem)
	}
	return fmt.Sprintf("artifact %s: %s %s", e.Dir, e.File, e.Problem)
}

// Check verifies an artifact directory against its meta.json: every file
// the build recorded has its size and SHA-256. A mismatch, a missing file,
// a missing or unreadable meta.json, or a meta.json without checksums (an
// older kbisect wrote it, without syncing: its files cannot be trusted)
// is a *DamagedError; a file that cannot be read for another reason is
// returned as it is.
func Check(dir string) error {
	a, err := loadArtifact(dir)
	if err != nil {
		return &DamagedError{Dir: dir, Problem: "has no readable meta.json (" + err.Error() + "): not a complete artifact"}
	}
	if len(a.Files) == 0 {
		return &DamagedError{Dir: dir, Problem: "has no checksums in meta.json (an older kbisect wrote it): its files cannot be trusted"}
	}
	names := make([]string, 0, len(a.Files))
	for name := range a.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		want := a.Files[name]
		if name != filepath.Base(name) || strings.HasPrefix(name, ".") {
			return &DamagedError{Dir: dir, Problem: fmt.Sprintf("meta.json names %q, not a file of the artifact", name)}
		}
		got, err := sumFile(filepath.Join(dir, name))
		switch {
		case os.IsNotExist(err):
			return &DamagedError{Dir: dir, File: name, Problem: "is missing"}
		case err != nil:
			return fmt.Errorf("checking artifact %s: %w", dir, err)
		case got.Size != want.Size:
			return &DamagedError{Dir: dir, File: name, Problem: fmt.Sprintf("is %d bytes, the build wrote %d", got.Size, want.Size)}
		case got.SHA256 != want.SHA256:
			return &DamagedError{Dir: dir, File: name, Problem: fmt.Sprintf("has SHA-256 %.12s…, the build wrote %.12s…", got.SHA256, want.SHA256)}
		}
	}
	return nil
}

// sumFile is the size and SHA-256 of a file.
func sumFile(path string) (FileSum, error) {
	f, err := os.Open(path)
	if err != nil {
		return FileSum{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return FileSum{}, err
	}
	return FileSum{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// sumFiles records every regular file of an artifact directory.
func sumFiles(dir string) (map[string]FileSum, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	sums := map[string]FileSum{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		s, err := sumFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		sums[e.Name()] = s
	}
	return sums, nil
}

// discard removes a damaged artifact from the cache, meta.json first, so
// that no reader takes what is left for a complete one.
func discard(dir string) error {
	if err := os.Remove(filepath.Join(dir, "meta.json")); err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.RemoveAll(dir)
}

// syncPath makes a file's content, or a directory's entries, durable.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// staleAfter is the age past which a temporary file of the cache is a
// killed process's: kbisect writes one in milliseconds, an artifact's
// directory in minutes, so a concurrent builder's is never that old.
const staleAfter = time.Hour

// sweep removes what a killed kbisect left in the cache: the index's
// temporary files (atomicfile's .<name>.<digits>, the .<name>.tmp of
// older versions), artifact directories never renamed into place
// (<key>.tmp) and artifacts that never got their meta.json (with its
// temporary file). Only those older than staleAfter go: the cache may be
// shared by builders running now. It returns what it removed.
func (o Options) sweep() []string {
	if o.CacheDir == "" {
		return nil // not a cache: never the working directory
	}
	var removed []string
	remove := func(path string, e os.DirEntry) {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleAfter && os.RemoveAll(path) == nil {
			removed = append(removed, path)
		}
	}
	inputs := filepath.Join(o.CacheDir, "inputs")
	if entries, err := os.ReadDir(inputs); err == nil {
		for _, e := range entries {
			if e.Type().IsRegular() && isTempName(e.Name()) {
				remove(filepath.Join(inputs, e.Name()), e)
			}
		}
	}
	root := filepath.Join(o.CacheDir, "artifacts")
	entries, err := os.ReadDir(root)
	if err != nil {
		return removed
	}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if !e.IsDir() {
			continue
		}
		// meta.json, written last, marks a complete artifact.
		if _, err := os.Lstat(filepath.Join(dir, "meta.json")); err != nil || strings.HasSuffix(e.Name(), ".tmp") {
			remove(dir, e)
		}
	}
	return removed
}

// isTempName says whether name is a temporary name of the cache's index:
// .<name>.kbisect-tmp<digits> (atomicfile's), .<name>.<digits> or
// .<name>.tmp (older versions').
func isTempName(name string) bool {
	rest, ok := strings.CutPrefix(name, ".")
	i := strings.LastIndexByte(rest, '.')
	if !ok || i <= 0 {
		return false
	}
	suffix := rest[i+1:]
	suffix = strings.TrimPrefix(suffix, "kbisect-tmp")
	return suffix == "tmp" || (suffix != "" && strings.Trim(suffix, "0123456789") == "")
}
