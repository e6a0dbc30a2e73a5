package bisect

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// RevisionError says why a revision given by the user names no commit.
type RevisionError struct {
	Rev    string
	Reason string
}

func (e *RevisionError) Error() string { return fmt.Sprintf("revision %q: %s", e.Rev, e.Reason) }

// Resolve turns a revision as git accepts it — a tag, a branch, a remote
// branch, HEAD, a full or unambiguous short hash, each followed by any
// number of ~N and ^N — into a commit. Annotated tags are peeled. An
// ambiguous short hash is an error that lists the commits it could name.
func (g *Graph) Resolve(rev string) (plumbing.Hash, error) {
	if strings.Contains(rev, "@{") || strings.Contains(rev, "..") || strings.Contains(rev, ":") || strings.Contains(rev, "^{/") {
		return plumbing.ZeroHash, &RevisionError{rev, "reflog, upstream, range and path syntax is not taken here: name the commit (`git rev-parse " + rev + "` prints it)"}
	}
	base, suffix := splitRevision(rev)
	if base == "@" {
		base = "HEAD" // git's shorthand
	}
	if base == "" {
		return plumbing.ZeroHash, &RevisionError{rev, "empty revision"}
	}
	h, err := g.resolveBase(rev, base)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	id := g.id(h)
	for len(suffix) > 0 {
		op := suffix[0]
		suffix = suffix[1:]
		n, digits := leadingNumber(suffix)
		suffix = suffix[digits:]
		if digits == 0 {
			n = 1
		}
		if err := g.parse(id); err != nil {
			return plumbing.ZeroHash, err
		}
		switch op {
		case '~':
			for i := 0; i < n; i++ {
				if err := g.parse(id); err != nil {
					return plumbing.ZeroHash, err
				}
				ps := g.nodes[id].parents
				if len(ps) == 0 {
					return plumbing.ZeroHash, &RevisionError{rev, fmt.Sprintf("%s has only %d generations of first parents", h, i)}
				}
				id = ps[0]
			}
		case '^':
			if n == 0 {
				continue // REV^0 is the commit itself
			}
			ps := g.nodes[id].parents
			if n > len(ps) {
				return plumbing.ZeroHash, &RevisionError{rev, fmt.Sprintf("commit %s has %d parent(s), no parent %d", g.nodes[id].hash, len(ps), n)}
			}
			id = ps[n-1]
		}
	}
	if err := g.parse(id); err != nil {
		return plumbing.ZeroHash, &RevisionError{rev, err.Error()}
	}
	return g.nodes[id].hash, nil
}

// splitRevision separates "v6.12~3^2" into "v6.12" and "~3^2".
func splitRevision(rev string) (string, string) {
	rev = strings.TrimSuffix(strings.TrimSuffix(rev, "^{commit}"), "^{}")
	i := len(rev)
	for i > 0 {
		j := i - 1
		for j >= 0 && rev[j] >= '0' && rev[j] <= '9' {
			j--
		}
		if j >= 0 && (rev[j] == '~' || rev[j] == '^') {
			i = j
			continue
		}
		break
	}
	return rev[:i], rev[i:]
}

func leadingNumber(s string) (int, int) {
	d := 0
	for d < len(s) && s[d] >= '0' && s[d] <= '9' {
		d++
	}
	if d == 0 {
		return 0, 0
	}
	n, err := strconv.Atoi(s[:d])
	if err != nil {
		return 1 << 30, d
	}
	return n, d
}

func (g *Graph) resolveBase(rev, base string) (plumbing.Hash, error) {
	if h, ok := parseHex(base); ok {
		return g.peel(rev, h)
	}
	if h, ok := g.pseudoRef(base); ok {
		return g.peel(rev, h)
	}
	for _, name := range refCandidates(base) {
		ref, err := g.repo.Reference(plumbing.ReferenceName(name), true)
		if err == nil {
			return g.peel(rev, ref.Hash())
		}
	}
	if len(base) >= 4 && len(base) < 40 && isAllHex(base) {
		return g.resolveShortHash(rev, strings.ToLower(base))
	}
	return plumbing.ZeroHash, &RevisionError{rev, "no such branch, tag or commit in the repository (fetch it, or check the spelling)"}
}

// refCandidates is git's ref_rev_parse_rules order.
func refCandidates(name string) []string {
	if name == "HEAD" || strings.HasPrefix(name, "refs/") {
		return []string{name}
	}
	return []string{
		"refs/" + name,
		"refs/tags/" + name,
		"refs/heads/" + name,
		"refs/remotes/" + name,
		"refs/remotes/" + name + "/HEAD",
	}
}

func isAllHex(s string) bool {
	for _, c := range s {
		if !isHex(c) {
			return false
		}
	}
	return true
}

// peel follows annotated tags to the commit they name. A commit in the
// commit-graph file, and a tag whose peeled value packed-refs records, need
// no object read: the first object go-git reads costs it an index of every
// object in the pack (a quarter second and 100 MB per million objects).
func (g *Graph) peel(rev string, h plumbing.Hash) (plumbing.Hash, error) {
	for range 16 {
		if g.inCommitGraph(h) {
			return h, nil
		}
		if p, ok := g.packedPeeled()[h]; ok {
			h = p
			continue
		}
		obj, err := g.repo.Storer.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			if errors.Is(err, plumbing.ErrObjectNotFound) {
				return plumbing.ZeroHash, &RevisionError{rev, fmt.Sprintf("object %s is not in the repository", h)}
			}
			return plumbing.ZeroHash, fmt.Errorf("revision %q: %w", rev, err)
		}
		switch obj.Type() {
		case plumbing.CommitObject:
			return h, nil
		case plumbing.TagObject:
			tag, err := object.DecodeTag(g.repo.Storer, obj)
			if err != nil {
				return plumbing.ZeroHash, fmt.Errorf("revision %q: %w", rev, err)
			}
			h = tag.Target
		default:
			return plumbing.ZeroHash, &RevisionError{rev, fmt.Sprintf("names a %s, not a commit", obj.Type())}
		}
	}
	return plumbing.ZeroHash, &RevisionError{rev, "tag chain too long"}
}

// resolveShortHash finds the commits whose name starts with prefix. Like
// git in a commit context, objects that are not commits (or tags of
// commits) do not make a prefix ambiguous.
func (g *Graph) resolveShortHash(rev, prefix string) (plumbing.Hash, error) {
	type prefixer interface {
		HashesWithPrefix(prefix []byte) ([]plumbing.Hash, error)
	}
	ps, ok := g.repo.Storer.(prefixer)
	if !ok {
		return plumbing.ZeroHash, &RevisionError{rev, "short hashes are not supported by this repository's storage"}
	}
	raw := make([]byte, len(prefix)/2)
	for i := range raw {
		v, _ := strconv.ParseUint(prefix[2*i:2*i+2], 16, 8)
		raw[i] = byte(v)
	}
	hashes, err := ps.HashesWithPrefix(raw)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("revision %q: %w", rev, err)
	}
	seen := map[plumbing.Hash]bool{}
	var commits []plumbing.Hash
	var others int
	for _, h := range hashes {
		if !strings.HasPrefix(h.String(), prefix) {
			continue
		}
		c, err := g.peel(rev, h)
		if err != nil {
			others++
			continue
		}
		if !seen[c] {
			seen[c] = true
			commits = append(commits, h)
		}
	}
	switch len(commits) {
	case 0:
		if others > 0 {
			return plumbing.ZeroHash, &RevisionError{rev, "names no commit (only other objects start with it)"}
		}
		return plumbing.ZeroHash, &RevisionError{rev, "no such branch, tag or commit in the repository (fetch it, or check the spelling)"}
	case 1:
		return g.peel(rev, commits[0])
	}
	sort.Slice(commits, func(i, j int) bool { return commits[i].String() < commits[j].String() })
	var b strings.Builder
	fmt.Fprintf(&b, "short hash is ambiguous; it could be any of:")
	for _, h := range commits {
		fmt.Fprintf(&b, "\n  %s %s", h, g.describeObject(h))
	}
	b.WriteString("\nuse more hex digits")
	return plumbing.ZeroHash, &RevisionError{rev, b.String()}
}

func (g *Graph) describeObject(h plumbing.Hash) string {
	obj, err := g.repo.Storer.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return ""
	}
	switch obj.Type() {
	case plumbing.CommitObject:
		c, err := object.DecodeCommit(g.repo.Storer, obj)
		if err != nil {
			return "commit"
		}
		return fmt.Sprintf("commit %s %s", c.Committer.When.Format("2006-01-02"), Subject(c.Message))
	case plumbing.TagObject:
		t, err := object.DecodeTag(g.repo.Storer, obj)
		if err != nil {
			return "tag"
		}
		return "tag " + t.Name
	}
	return obj.Type().String()
}

// Subject is the first line of a commit message.
func Subject(msg string) string {
	msg = strings.TrimLeft(msg, "\n")
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}

// pseudoRef reads ORIG_HEAD, FETCH_HEAD and their kind: files in the git
// directory whose first line starts with an object name.
func (g *Graph) pseudoRef(name string) (plumbing.Hash, bool) {
	if name == "HEAD" || strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") != "" {
		return plumbing.ZeroHash, false
	}
	data, err := os.ReadFile(filepath.Join(g.gitDir, name))
	if err != nil || len(data) < 40 {
		return plumbing.ZeroHash, false
	}
	return parseHex(string(data[:40]))
}
