package bisect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	cgv2 "github.com/go-git/go-git/v5/plumbing/format/commitgraph/v2"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// Graph is the part of a repository's commit graph that has been read so
// far. Commits are read lazily, from the commit-graph file when the
// repository has one and from the commit objects otherwise, and are named
// by dense node numbers so the walks can keep their flags in slices.
type Graph struct {
	repo    *git.Repository
	storage *filesystem.Storage // closed with the graph when set
	cg      cgv2.Index          // nil when the repository has no usable commit-graph
	unmap   func() error
	// gitDir is the repository's git directory and commonDir the one that
	// holds its objects and refs (they differ in linked worktrees).
	gitDir, commonDir string
	peeled            map[plumbing.Hash]plumbing.Hash
	buf               bytes.Buffer // reused for commit objects
	// What git rewrites of the history it reads: grafts (shallow
	// boundaries are grafts without parents) and replace refs.
	grafts  map[plumbing.Hash][]plumbing.Hash
	replace map[plumbing.Hash]plumbing.Hash
	ids     map[plumbing.Hash]int32
	nodes   []node
	// infos are the commits' infos read so far (Infos), under infoMu: a
	// lab's progress events ask for subjects from several goroutines.
	infoMu sync.Mutex
	infos  map[plumbing.Hash]CommitInfo
}

type node struct {
	hash    plumbing.Hash
	date    int64 // committer time, as git's commit->date
	parents []int32
	parsed  bool
}

// OpenGraph opens the repository that contains dir; the git it runs to
// find the repository's directories is killed when ctx ends. A linked
// worktree opens its repository, and a repository with extensions that
// only say how work trees are configured (a sparse checkout's
// worktreeConfig) opens as git opens it.
func OpenGraph(ctx context.Context, dir string) (*Graph, error) {
	g := &Graph{ids: make(map[plumbing.Hash]int32)}
	var err error
	if g.gitDir, g.commonDir, err = gitDirs(ctx, dir); err != nil {
		return nil, err
	}
	if err := checkAlternates(g.commonDir); err != nil {
		return nil, err
	}
	var fs billy.Filesystem = osfs.New(g.gitDir)
	if g.commonDir != g.gitDir {
		fs = dotgit.NewRepositoryFilesystem(fs, osfs.New(g.commonDir))
	}
	// Keep pack files open: by default go-git opens and closes the pack for
	// every object it reads, a fifth of the time of a walk. Keep its object
	// cache small: the graph keeps what it parsed, and each commit is read
	// once. And let it follow alternates (clone --reference), which are
	// absolute paths outside the .git directory.
	st := filesystem.NewStorageWithOptions(fs, cache.NewObjectLRU(4*cache.MiByte),
		filesystem.Options{KeepDescriptors: true, AlternatesFS: osfs.New("/")})
	if g.repo, err = git.Open(readerConfig{st}, nil); err != nil {
		return nil, fmt.Errorf("open git repository %s: %w", dir, err)
	}
	g.storage = st
	if err := g.loadRewrites(); err != nil {
		return nil, err
	}
	if !g.rewritten() {
		g.openCommitGraph()
	}
	return g, nil
}

// readerConfig is the repository's storage with its config as a reader of
// objects and refs sees it: without the extensions that change only how
// work trees are configured or kept, which go-git refuses as unknown
// though they change nothing it reads.
type readerConfig struct{ *filesystem.Storage }

// workTreeExtensions change nothing in the objects and refs kbisect reads.
var workTreeExtensions = []string{"worktreeConfig", "preciousObjects", "relativeWorktrees"}

func (s readerConfig) Config() (*config.Config, error) {
	c, err := s.Storage.Config()
	if err != nil || c.Raw == nil || !c.Raw.HasSection("extensions") {
		return c, err
	}
	sec := c.Raw.Section("extensions")
	for _, ext := range workTreeExtensions {
		sec.RemoveOption(ext)
	}
	if len(sec.Options) == 0 {
		c.Raw.RemoveSection("extensions")
	}
	return c, nil
}

// CommitsRead is the number of commits whose parents have been read.
func (g *Graph) CommitsRead() int {
	n := 0
	for i := range g.nodes {
		if g.nodes[i].parsed {
			n++
		}
	}
	return n
}

// HasCommitGraph reports whether commits are read from a commit-graph file.
func (g *Graph) HasCommitGraph() bool { return g.cg != nil }

// Close releases the commit-graph mapping.
func (g *Graph) Close() error {
	var err error
	if g.cg != nil {
		err = g.cg.Close()
	}
	if g.unmap != nil {
		if uerr := g.unmap(); err == nil {
			err = uerr
		}
	}
	if g.storage != nil {
		if serr := g.storage.Close(); err == nil {
			err = serr
		}
	}
	g.cg, g.unmap, g.storage = nil, nil, nil
	return err
}

// openCommitGraph maps the commit-graph file into memory (go-git reads it
// with many small ReadAt calls, which become copies instead of system
// calls), or falls back to a split commit-graph chain. Like git, it takes
// the first object directory that has one: the repository's own, then its
// alternates. Commits the file lacks are read from their objects.
func (g *Graph) openCommitGraph() {
	for _, objects := range g.objectDirs() {
		if g.openCommitGraphFile(filepath.Join(objects, "info", "commit-graph")) {
			return
		}
		if idx, err := cgv2.OpenChainIndex(osfs.New(filepath.Dir(objects))); err == nil {
			g.cg = idx
			return
		}
	}
}

func (g *Graph) openCommitGraphFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return false
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return false
	}
	idx, err := cgv2.OpenFileIndex(nopCloser{bytes.NewReader(data)})
	if err != nil {
		_ = syscall.Munmap(data)
		return false
	}
	g.cg = idx
	g.unmap = func() error { return syscall.Munmap(data) }
	return true
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// id returns the node number of h, creating an unparsed node if needed.
func (g *Graph) id(h plumbing.Hash) int32 {
	if id, ok := g.ids[h]; ok {
		return id
	}
	id := int32(len(g.nodes))
	g.nodes = append(g.nodes, node{hash: h})
	g.ids[h] = id
	return id
}

// Parents returns the parents of a commit, as the bisection sees them
// (grafts and replacements applied).
func (g *Graph) Parents(h plumbing.Hash) ([]plumbing.Hash, error) {
	id := g.id(h)
	if err := g.parse(id); err != nil {
		return nil, err
	}
	out := make([]plumbing.Hash, 0, len(g.nodes[id].parents))
	for _, p := range g.nodes[id].parents {
		out = append(out, g.nodes[p].hash)
	}
	return out, nil
}

// CommitTime returns a commit's committer time (Unix seconds).
func (g *Graph) CommitTime(h plumbing.Hash) (int64, error) {
	id := g.id(h)
	if err := g.parse(id); err != nil {
		return 0, err
	}
	return g.nodes[id].date, nil
}

// Hash returns the object name of node id.
func (g *Graph) Hash(id int32) plumbing.Hash { return g.nodes[id].hash }

// forgetParsed drops what was read of every commit, as a new git process
// starts with nothing parsed.
func (g *Graph) forgetParsed() {
	for i := range g.nodes {
		g.nodes[i].parsed, g.nodes[i].parents = false, nil
	}
}

// parse reads the parents and date of node id once.
func (g *Graph) parse(id int32) error {
	n := &g.nodes[id]
	if n.parsed {
		return nil
	}
	h := n.hash
	var parents []plumbing.Hash
	var date int64
	var fromGraph bool
	if g.cg != nil {
		if i, err := g.cg.GetIndexByHash(h); err == nil {
			cd, err := g.cg.GetCommitDataByIndex(i)
			if err != nil {
				return fmt.Errorf("read commit-graph entry of %s: %w", h, err)
			}
			parents, date, fromGraph = cd.ParentHashes, cd.When.Unix(), true
		}
	}
	if !fromGraph {
		src := g.replacement(h)
		var err error
		parents, date, err = g.readCommitObject(src)
		if err != nil {
			return err
		}
		if gp, ok := g.grafts[h]; ok {
			parents = gp
		}
	}
	ids := make([]int32, len(parents))
	for i, p := range parents {
		ids[i] = g.id(p)
	}
	n = &g.nodes[id] // g.id may have grown the slice
	n.parents, n.date, n.parsed = ids, date, true
	return nil
}

// readCommitObject reads only what the walks need from a commit object:
// its parent lines and the committer time.
func (g *Graph) readCommitObject(h plumbing.Hash) ([]plumbing.Hash, int64, error) {
	obj, err := g.repo.Storer.EncodedObject(plumbing.CommitObject, h)
	if err != nil {
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return nil, 0, fmt.Errorf("commit %s is not in the repository", h)
		}
		return nil, 0, fmt.Errorf("read commit %s: %w", h, err)
	}
	r, err := obj.Reader()
	if err != nil {
		return nil, 0, fmt.Errorf("read commit %s: %w", h, err)
	}
	g.buf.Reset()
	_, err = g.buf.ReadFrom(r)
	r.Close()
	if err != nil {
		return nil, 0, fmt.Errorf("read commit %s: %w", h, err)
	}
	parents, date, err := parseCommitHeader(g.buf.Bytes())
	if err != nil {
		return nil, 0, fmt.Errorf("commit %s: %w", h, err)
	}
	return parents, date, nil
}

// parseCommitHeader reads the parent lines and the committer time of a
// commit object; the header ends at the first empty line.
func parseCommitHeader(data []byte) ([]plumbing.Hash, int64, error) {
	var parents []plumbing.Hash
	var date int64
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(line) == 0 {
			break
		}
		switch {
		case bytes.HasPrefix(line, []byte("parent ")):
			p, ok := parseHex(string(line[len("parent "):]))
			if !ok {
				return nil, 0, fmt.Errorf("malformed parent line %q", line)
			}
			parents = append(parents, p)
		case bytes.HasPrefix(line, []byte("committer ")):
			date = parseIdentTime(line)
		}
	}
	return parents, date, nil
}

// parseIdentTime takes the time from "committer Name <mail> 1700000000 +0100"
// as git's parse_commit_date does; an unreadable time is 0, as in git.
func parseIdentTime(line []byte) int64 {
	gt := bytes.LastIndexByte(line, '>')
	if gt < 0 {
		return 0
	}
	fields := bytes.Fields(line[gt+1:])
	if len(fields) == 0 {
		return 0
	}
	t, err := strconv.ParseInt(string(fields[0]), 10, 64)
	if err != nil {
		return 0
	}
	return t
}

func parseHex(s string) (plumbing.Hash, bool) {
	if len(s) != 40 {
		return plumbing.ZeroHash, false
	}
	for _, c := range s {
		if !isHex(c) {
			return plumbing.ZeroHash, false
		}
	}
	return plumbing.NewHash(s), true
}

func isHex(c rune) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// gitDirs asks git for the git directory of dir and the common directory
// that holds the objects, refs, shallow file and grafts (they differ in a
// linked worktree).
func gitDirs(ctx context.Context, dir string) (string, string, error) {
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir")
	cmd.Dir = dir
	out, err := cmd.Output()
	if ctx.Err() != nil {
		return "", "", fmt.Errorf("git rev-parse in %s: %w", dir, ctx.Err())
	}
	if err != nil {
		return "", "", fmt.Errorf("%s is not in a git repository: %v", dir, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		return "", "", fmt.Errorf("%s: unexpected output of git rev-parse: %q", dir, out)
	}
	return lines[0], lines[1], nil
}

// ParseHash reads a full 40-digit commit name, as the state files keep
// commits.
func ParseHash(s string) (plumbing.Hash, bool) { return parseHex(s) }
