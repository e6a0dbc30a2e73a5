package kbuild

import (
	"archive/tar"
	"io"
	"os"

	"kbisect/internal/tartree"
)

// writeTarball writes the tree under dir into a tar file, entries in
// name order, owned by root, with their modification times: the modules
// of an artifact as one file.
func writeTarball(path, dir string) error {
	names, err := tartree.List(dir)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := tartree.Write(f, func(tw *tar.Writer) error { return addAll(tw, dir, names) }); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func addAll(tw *tar.Writer, dir string, names []string) error {
	return tartree.Each(dir, names, func(hdr *tar.Header, p string) error {
		if hdr.Typeflag == tar.TypeDir {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "root", "root"
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, in)
		in.Close()
		return err
	})
}
