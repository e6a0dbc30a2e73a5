// Package tartree owns how kbisect turns a local directory tree into a tar
// stream: the entries in name order, symbolic links kept as links, the
// stream written through one large buffer. What a header says beyond that
// (owners, a directory's trailing slash) and what happens to a file's
// content on the way are the caller's: kbuild packs an artifact's modules
// as root's, remote hashes a copy to check it where it lands. Neither may
// import the other, so the walk they share lives here.
//
// It imports no other kbisect package.
package tartree

import (
	"archive/tar"
	"bufio"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// List returns the paths under dir, relative to it and in name order; dir
// itself is not among them.
func List(dir string) ([]string, error) {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			names = append(names, rel)
		}
		return nil
	})
	sort.Strings(names)
	return names, err
}

// Write writes a tar stream to w, whose entries add writes, and ends it.
func Write(w io.Writer, add func(*tar.Writer) error) error {
	// Kernel modules and images are many megabytes: one large buffer
	// keeps the writes to a file or an SSH session few.
	bw := bufio.NewWriterSize(w, 1<<20)
	tw := tar.NewWriter(bw)
	if err := add(tw); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// Each calls fn, in order, for each of names (paths relative to base) with
// its tar header and its path: the header as tar.FileInfoHeader makes it
// from the file itself (not what a link points to), named by the
// slash-separated relative path.
func Each(base string, names []string, fn func(hdr *tar.Header, path string) error) error {
	for _, rel := range names {
		p := filepath.Join(base, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if err := fn(hdr, p); err != nil {
			return err
		}
	}
	return nil
}
