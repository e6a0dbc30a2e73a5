package remote

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"kbisect/internal/shell"
	"kbisect/internal/tartree"
)

// CopyStats says what a copy moved and how long it took.
type CopyStats struct {
	Files   int
	Bytes   int64
	Elapsed time.Duration
}

// Copy sends src (a file or a directory tree, symlinks kept) into dir on
// the host as one tar stream over the session, then checks the SHA-256 of
// every regular file as it landed on the host's disk: a copy that differs
// in any byte is an error naming the files.
func (h *Host) Copy(ctx context.Context, src, dir string) (CopyStats, error) {
	files, err := listTree(src)
	if err != nil {
		return CopyStats{}, err
	}
	return h.copyStream(ctx, src, dir, func(w io.Writer, sums map[string]string, st *CopyStats) error {
		return writeTar(w, src, files, sums, st)
	})
}

// CopyTarball unpacks a local tarball into dir on the host, as Copy does
// a tree: streamed, then every regular file's SHA-256 checked where it
// landed. An entry that would land outside dir is refused.
func (h *Host) CopyTarball(ctx context.Context, tarball, dir string) (CopyStats, error) {
	f, err := os.Open(tarball)
	if err != nil {
		return CopyStats{}, err
	}
	defer f.Close()
	return h.copyStream(ctx, tarball, dir, func(w io.Writer, sums map[string]string, st *CopyStats) error {
		return retar(w, f, sums, st)
	})
}

// copyStream sends the tar stream produce writes into dir on the host and
// compares the checksums of what landed with those produce recorded.
func (h *Host) copyStream(ctx context.Context, src, dir string, produce func(io.Writer, map[string]string, *CopyStats) error) (CopyStats, error) {
	start := time.Now()
	pr, pw := io.Pipe()
	sums := map[string]string{}
	sent := make(chan CopyStats, 1)
	produced := make(chan error, 1)
	go func() {
		var st CopyStats
		err := produce(pw, sums, &st)
		sent <- st
		produced <- err
		pw.CloseWithError(err)
	}()

	q := shell.Quote(dir)
	script := "set -e; mkdir -p " + q + "; tar -xf - -C " + q + " --no-same-owner; cd " + q + " && find . -type f -exec sha256sum {} +"
	shell.Trace(ctx, h.Name(), h.shCommand(script)+" < "+src)
	out, _, err := h.sendData(ctx, "copy", script, pr)
	if err != nil {
		pr.CloseWithError(err)
		if perr := <-produced; perr != nil {
			return CopyStats{}, fmt.Errorf("copy %s: %v", src, perr)
		}
		return CopyStats{}, err
	}
	// The host read the stream to its end, so the writer is done.
	stats := <-sent
	if err := <-produced; err != nil {
		return stats, fmt.Errorf("copy %s: %v", src, err)
	}
	if err := compareSums(sums, string(out)); err != nil {
		return stats, &InfraError{Host: h.Name(), Op: "copy", Err: fmt.Errorf("%s → %s: %v", src, dir, err)}
	}
	stats.Elapsed = time.Since(start)
	return stats, nil
}

// retar copies the entries of a tarball into a tar stream, hashing
// regular files on the way; names are kept inside the directory.
func retar(w io.Writer, r io.Reader, sums map[string]string, stats *CopyStats) error {
	return tartree.Write(w, func(tw *tar.Writer) error {
		return retarEntries(tw, r, sums, stats)
	})
}

func retarEntries(tw *tar.Writer, r io.Reader, sums map[string]string, stats *CopyStats) error {
	tr := tar.NewReader(bufio.NewReaderSize(r, 1<<20))
	symlinks := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("the tarball's entry %q lands outside the directory", hdr.Name)
		}
		if hdr.Typeflag == tar.TypeLink {
			return fmt.Errorf("the tarball's entry %q is a hard link", hdr.Name)
		}
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if symlinks[dir] {
				return fmt.Errorf("the tarball's entry %q goes through the symbolic link %s", hdr.Name, dir)
			}
		}
		if hdr.Typeflag == tar.TypeSymlink {
			symlinks[name] = true
		}
		hdr.Name = name
		if hdr.Typeflag == tar.TypeDir {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if err := sendFile(tw, tr, name, sums, stats); err != nil {
			return err
		}
	}
}

// listTree returns the paths under src, relative to it, sorted; a single
// file gives its base name.
func listTree(src string) ([]string, error) {
	fi, err := os.Lstat(src)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []string{filepath.Base(src)}, nil
	}
	return tartree.List(src)
}

// writeTar writes the files into a tar stream, hashing regular files on
// the way.
func writeTar(w io.Writer, src string, files []string, sums map[string]string, stats *CopyStats) error {
	base := src
	if fi, err := os.Lstat(src); err == nil && !fi.IsDir() {
		base = filepath.Dir(src)
	}
	return tartree.Write(w, func(tw *tar.Writer) error {
		return tartree.Each(base, files, func(hdr *tar.Header, p string) error {
			hdr.Uname, hdr.Gname = "", ""
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if hdr.Typeflag != tar.TypeReg {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return sendFile(tw, f, hdr.Name, sums, stats)
		})
	})
}

// sendFile copies a regular file's content into the stream and keeps its
// SHA-256, which the host's sha256sum must match.
func sendFile(w io.Writer, r io.Reader, name string, sums map[string]string, stats *CopyStats) error {
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), r)
	if err != nil {
		return err
	}
	sums["./"+name] = hex.EncodeToString(h.Sum(nil))
	stats.Files++
	stats.Bytes += n
	return nil
}

// compareSums checks sha256sum's output ("hash  ./path" per file) against
// the sums of what was sent.
func compareSums(sent map[string]string, out string) error {
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		sum, path, ok := strings.Cut(line, "  ")
		if ok {
			got[path] = sum
		}
	}
	var bad []string
	for path, sum := range sent {
		switch g, ok := got[path]; {
		case !ok:
			bad = append(bad, path+" (missing)")
		case g != sum:
			bad = append(bad, path+" (different)")
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	if len(bad) > 5 {
		bad = append(bad[:5], fmt.Sprintf("and %d more", len(bad)-5))
	}
	return fmt.Errorf("%d files did not arrive intact: %s", len(bad), strings.Join(bad, ", "))
}
