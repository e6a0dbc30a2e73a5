package nightly

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
)

// fetchReleases fetches the branch (when given) and the tags from the
// remote into the tree, with git; it returns the fetched branch's head
// (zero without a branch).
func fetchReleases(ctx context.Context, tree, gitDir, remote, branch string) (plumbing.Hash, error) {
	git := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", tree}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0") // a prompt would hang the night
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	}
	args := []string{"fetch", "--quiet", "--", remote, "refs/tags/*:refs/tags/*"}
	ref := ""
	if branch != "" {
		ref = "refs/remotes/kbisect-nightly/" + branch
		args = append(args, "+refs/heads/"+branch+":"+ref)
	}
	// Machines sharing the tree fetch one at a time: git locks each ref.
	lock, err := os.OpenFile(filepath.Join(gitDir, "kbisect", "fetch.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return plumbing.ZeroHash, err
	}
	_, err = git(args...)
	_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("fetching %s into %s: %w", remoteName(remote), tree, err)
	}
	if ref == "" {
		return plumbing.ZeroHash, nil
	}
	out, err := git("rev-parse", "--verify", ref+"^{commit}")
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("%s after the fetch: %w", ref, err)
	}
	return plumbing.NewHash(strings.TrimSpace(string(out))), nil
}

// remoteName is how the history names a remote: a local path made
// absolute, a URL without its password or token.
func remoteName(remote string) string {
	if u, err := url.Parse(remote); err == nil && u.Scheme != "" && u.Host != "" {
		u.User = nil
		return u.String()
	}
	if !strings.Contains(remote, ":") || strings.HasPrefix(remote, "/") || strings.HasPrefix(remote, ".") {
		if abs, err := filepath.Abs(remote); err == nil {
			return abs
		}
	}
	return remote
}

// followedReleases are the release tags matching the glob (on the branch
// whose head is given), newest first.
func followedReleases(g *bisect.Graph, glob string, head plumbing.Hash) ([]bisect.Release, error) {
	all, err := g.Releases()
	if err != nil {
		return nil, err
	}
	var out []bisect.Release
	for _, r := range all {
		if ok, _ := path.Match(glob, r.Tag); !ok {
			continue
		}
		if !head.IsZero() {
			on, err := g.IsAncestor(r.Commit, head)
			if err != nil {
				return nil, err
			}
			if !on {
				continue
			}
		}
		out = append(out, r)
	}
	return out, nil
}
