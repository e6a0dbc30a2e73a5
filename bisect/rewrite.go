package bisect

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// loadRewrites reads what makes git see another history than the commit
// objects say, so that the bisection walks the history git walks:
// .git/shallow (commits whose parents were not fetched), info/grafts, and
// refs/replace/* (unless GIT_NO_REPLACE_OBJECTS is set).
func (g *Graph) loadRewrites() error {
	g.grafts = map[plumbing.Hash][]plumbing.Hash{}
	g.replace = map[plumbing.Hash]plumbing.Hash{}
	if err := readHashLines(filepath.Join(g.commonDir, "shallow"), func(f []plumbing.Hash) {
		g.grafts[f[0]] = nil
	}); err != nil {
		return err
	}
	if err := readHashLines(filepath.Join(g.commonDir, "info", "grafts"), func(f []plumbing.Hash) {
		g.grafts[f[0]] = f[1:]
	}); err != nil {
		return err
	}
	if os.Getenv("GIT_NO_REPLACE_OBJECTS") != "" {
		return nil
	}
	base := "refs/replace/"
	if b := os.Getenv("GIT_REPLACE_REF_BASE"); b != "" {
		base = strings.TrimSuffix(b, "/") + "/"
	}
	refs, err := g.repo.References()
	if err != nil {
		return fmt.Errorf("read references: %w", err)
	}
	defer refs.Close()
	return refs.ForEach(func(r *plumbing.Reference) error {
		name, ok := strings.CutPrefix(r.Name().String(), base)
		if !ok || r.Type() != plumbing.HashReference {
			return nil
		}
		if h, ok := parseHex(name); ok {
			g.replace[h] = r.Hash()
		}
		return nil
	})
}

// replacement follows replace refs, also a replacement that is itself
// replaced, to the object git reads for h.
func (g *Graph) replacement(h plumbing.Hash) plumbing.Hash {
	for range 16 {
		r, ok := g.replace[h]
		if !ok {
			break
		}
		h = r
	}
	return h
}

// rewritten reports whether the history is rewritten; git then ignores the
// commit-graph file, and so do we.
func (g *Graph) rewritten() bool { return len(g.grafts) > 0 || len(g.replace) > 0 }

// readHashLines calls fn with the object names on each line of a file of
// the grafts format ("<commit> [<parent>…]"); a missing file is empty.
func readHashLines(path string, fn func([]plumbing.Hash)) error {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		var hs []plumbing.Hash
		for _, word := range strings.Fields(text) {
			h, ok := parseHex(word)
			if !ok {
				return fmt.Errorf("%s:%d: %q is not an object name", path, line, word)
			}
			hs = append(hs, h)
		}
		fn(hs)
	}
	return sc.Err()
}

// objectDirs lists the object directories git reads: the repository's own,
// then its alternates (absolute, or relative to the objects directory).
func (g *Graph) objectDirs() []string {
	own := filepath.Join(g.commonDir, "objects")
	dirs := []string{own}
	f, err := os.Open(filepath.Join(own, "info", "alternates"))
	if err != nil {
		return dirs
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.TrimSpace(sc.Text())
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(own, p)
		}
		dirs = append(dirs, filepath.Clean(p))
	}
	return dirs
}

// checkAlternates refuses what go-git cannot follow in
// objects/info/alternates — relative paths (git reads them from the objects
// directory, go-git from the root of the file system) and alternates that
// have alternates — rather than fail later on a missing object.
func checkAlternates(commonDir string) error {
	path := filepath.Join(commonDir, "objects", "info", "alternates")
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		p := strings.TrimSpace(sc.Text())
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		if !filepath.IsAbs(p) {
			abs := filepath.Clean(filepath.Join(commonDir, "objects", p))
			return fmt.Errorf("%s:%d: relative alternate %q is not supported; write it as the absolute path %s", path, line, p, abs)
		}
		if _, err := os.Stat(filepath.Join(p, "info", "alternates")); err == nil {
			return fmt.Errorf("%s:%d: %s has alternates of its own, which kbisect cannot follow; bisect in a clone without --shared/--reference, or run `git repack -a -d` in this one", path, line, p)
		}
	}
	return nil
}
