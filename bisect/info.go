package bisect

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// CommitInfo is what reports show of a commit.
type CommitInfo struct {
	Hash    plumbing.Hash
	Subject string
	Author  string // "Name <mail>"
	Date    string // the author date as git shows it
}

// Info reads the author and subject of a commit; git is killed when ctx
// ends.
func (g *Graph) Info(ctx context.Context, h plumbing.Hash) (CommitInfo, error) {
	infos, err := g.Infos(ctx, []plumbing.Hash{h})
	if err != nil {
		return CommitInfo{}, err
	}
	return infos[h], nil
}

// Infos reads the author and subject of several commits with one git
// command, once per commit: what was read is kept, as a run asks again
// for the commits it reported. Reports need a handful of these per run;
// reading them through go-git would make it index every object of the
// pack first. git is killed when ctx ends.
func (g *Graph) Infos(ctx context.Context, hs []plumbing.Hash) (map[plumbing.Hash]CommitInfo, error) {
	g.infoMu.Lock()
	defer g.infoMu.Unlock()
	out := make(map[plumbing.Hash]CommitInfo, len(hs))
	var missing []plumbing.Hash
	for _, h := range hs {
		if info, ok := g.infos[h]; ok {
			out[h] = info
		} else if !slices.Contains(missing, h) {
			missing = append(missing, h)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	read, err := g.showInfos(ctx, missing)
	if err != nil {
		return nil, err
	}
	if g.infos == nil {
		g.infos = make(map[plumbing.Hash]CommitInfo)
	}
	for h, info := range read {
		g.infos[h], out[h] = info, info
	}
	return out, nil
}

// infoArgs is the git command line that reads commits' infos.
// --diff-merges=off: `git show -s` (and --no-patch, in git 2.39) still
// computes a merge's combined diff, reading the trees of every parent:
// 0.6 s for one u-boot merge, and a failure where a tree is missing.
func (g *Graph) infoArgs(hs []plumbing.Hash) []string {
	args := []string{"--git-dir=" + g.gitDir, "show", "-s", "--diff-merges=off", "--no-notes", "--date=default",
		"--format=%H%x1f%an <%ae>%x1f%ad%x1f%s%x1e"}
	for _, h := range hs {
		args = append(args, h.String())
	}
	return args
}

// showInfos runs git show for hs.
func (g *Graph) showInfos(ctx context.Context, hs []plumbing.Hash) (map[plumbing.Hash]CommitInfo, error) {
	out := make(map[plumbing.Hash]CommitInfo, len(hs))
	cmd := exec.CommandContext(ctx, "git", g.infoArgs(hs)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	data, err := cmd.Output()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("git show in %s: %w", g.gitDir, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("git show: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	for _, rec := range strings.Split(string(data), "\x1e") {
		f := strings.Split(strings.TrimLeft(rec, "\n"), "\x1f")
		if len(f) != 4 {
			continue
		}
		h, ok := parseHex(f[0])
		if !ok {
			continue
		}
		out[h] = CommitInfo{Hash: h, Author: f[1], Date: f[2], Subject: f[3]}
	}
	for _, h := range hs {
		if _, ok := out[h]; !ok {
			return nil, fmt.Errorf("git show printed nothing for %s", h)
		}
	}
	return out, nil
}

// inCommitGraph reports whether h is a commit of the commit-graph file.
func (g *Graph) inCommitGraph(h plumbing.Hash) bool {
	if g.cg == nil {
		return false
	}
	_, err := g.cg.GetIndexByHash(h)
	return err == nil
}

// packedPeeled returns the peeled values that packed-refs records for
// annotated tags ("^<commit>" after the tag's line), read once.
func (g *Graph) packedPeeled() map[plumbing.Hash]plumbing.Hash {
	if g.peeled != nil {
		return g.peeled
	}
	g.peeled = map[plumbing.Hash]plumbing.Hash{}
	f, err := os.Open(filepath.Join(g.commonDir, "packed-refs"))
	if err != nil {
		return g.peeled
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var last plumbing.Hash
	for sc.Scan() {
		line := sc.Text()
		if peeled, ok := strings.CutPrefix(line, "^"); ok {
			if p, ok := parseHex(peeled); ok && !last.IsZero() {
				g.peeled[last] = p
			}
			continue
		}
		last = plumbing.ZeroHash
		if h, ok := parseHex(strings.SplitN(line, " ", 2)[0]); ok {
			last = h
		}
	}
	return g.peeled
}
