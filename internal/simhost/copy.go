package simhost

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
)

// stageDir is where remote.Install copies a kernel image before
// installing it: /var/tmp/kbisect-stage/<release>.
var stageDir = regexp.MustCompile(`/var/tmp/kbisect-stage/([A-Za-z0-9._+~-]+)`)

// untar takes a copy: it reads the tar stream and answers sha256sum's
// lines for what arrived. An image staged for a release that carries a
// noise level sets that release's level.
func (h *Host) untar(command string, stdin io.Reader, stdout, stderr io.Writer) int {
	release := ""
	if m := stageDir.FindStringSubmatch(command); m != nil {
		release = m[1]
	}
	tr := tar.NewReader(stdin)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Fprintf(stderr, "tar: %v\n", err)
			return 2
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		sum := sha256.New()
		var marker levelScanner
		if _, err := io.Copy(io.MultiWriter(sum, &marker), tr); err != nil {
			fmt.Fprintf(stderr, "tar: %v\n", err)
			return 2
		}
		line := hex.EncodeToString(sum.Sum(nil))
		h.mu.Lock()
		h.files[hdr.Name] = line
		if l, ok := marker.level(); ok && release != "" {
			h.levels[release] = l
		}
		h.mu.Unlock()
		fmt.Fprintf(stdout, "%s  ./%s\n", line, hdr.Name)
	}
	return 0
}
