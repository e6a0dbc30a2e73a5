// Package atomicfile owns writing files so that a crash never leaves half
// of one: a reader, or a run resumed after kbisect was killed, finds the
// old file or the new one, whole. It also reads and writes the JSON state
// files kbisect keeps that way (evidence, calibration, A/B rounds). It
// imports no kbisect package.
package atomicfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// tmpMark is in the name of every temporary file WriteFile makes, so that
// one left by a killed process is known for what it is.
const tmpMark = ".kbisect-tmp"

// Sweep removes, under dir, the temporary files of writes that never
// ended (kbisect killed between writing and renaming) and were begun
// before olderThan ago: 0 for a directory whose lock the caller holds, so
// that no write can be under way. It returns how many it removed.
func Sweep(dir string, olderThan time.Duration) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		name := d.Name()
		if d.IsDir() || !strings.HasPrefix(name, ".") || !strings.Contains(name, tmpMark) {
			return nil
		}
		if olderThan > 0 {
			if fi, err := d.Info(); err != nil || time.Since(fi.ModTime()) < olderThan {
				return nil
			}
		}
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return err
		}
		n++
		return nil
	})
	return n, err
}

// WriteFile replaces path with data: written to a temporary file beside
// it, synced, then renamed, so readers see the old or the new file, whole.
func WriteFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+tmpMark+"*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable: without it a crash may bring
// back the old name.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// WriteJSON writes v to path as indented JSON ending in a newline, with
// WriteFile, making path's directory first.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return WriteFile(path, append(b, '\n'))
}

// ReadJSON reads the JSON file at path into v. An error reading the file
// is returned as it is, so that os.IsNotExist tells a file not written
// yet; one decoding it names the file.
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return nil
}
