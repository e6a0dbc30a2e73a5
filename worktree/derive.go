package worktree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"kbisect/internal/commitid"
)

// A Change makes a commit from a base: the revert of a commit, or a patch
// applied. kbisect ab measures the kernel with and without it.
type Change struct {
	// Revert is the commit to revert (a full hash or any revision).
	Revert string
	// Patch is a patch file: a mail (git format-patch) is applied with
	// git am, a plain diff with git apply.
	Patch string
	// Mainline is the parent a merge is reverted against (git revert -m;
	// 0 for a commit that is not a merge).
	Mainline int
}

func (c Change) String() string {
	if c.Revert != "" {
		return "revert " + c.Revert
	}
	return "patch " + c.Patch
}

// ConflictError is a change that does not apply to its base.
type ConflictError struct {
	Change Change
	Base   string
	// Files are the files in conflict (or the patch's hunks that failed).
	Files []string
	// Detail is git's own word, when it names no file.
	Detail string
}

func (e *ConflictError) Error() string {
	what := "does not apply"
	if len(e.Files) > 0 {
		what += ": conflicts in " + strings.Join(e.Files, ", ")
	} else if e.Detail != "" {
		what += ": " + e.Detail
	}
	return fmt.Sprintf("%s on %s %s", e.Change, commitid.Short(e.Base), what)
}

// Derive makes the commit base + change in the repository of dir and
// returns its hash. It works in a scratch worktree under the git
// directory, so the user's checkout, index and untracked files are never
// touched. The commit is the same for the same inputs — author, committer
// and dates are fixed from the base — so a resumed comparison finds the
// kernel it measured; a ref under refs/kbisect/ keeps it from git gc.
func Derive(ctx context.Context, dir, base string, c Change) (string, error) {
	if (c.Revert == "") == (c.Patch == "") {
		return "", errors.New("derive: give a commit to revert or a patch, one of them")
	}
	if c.Patch != "" {
		// git runs in the scratch worktree: a relative path would not
		// be found there.
		abs, err := filepath.Abs(c.Patch)
		if err != nil {
			return "", err
		}
		c.Patch = abs
	}
	t, err := Open(ctx, dir)
	if err != nil {
		return "", err
	}
	baseHash, err := t.resolve(ctx, base)
	if err != nil {
		return "", err
	}
	var patch []byte
	key := baseHash
	if c.Revert != "" {
		h, err := t.resolve(ctx, c.Revert)
		if err != nil {
			return "", err
		}
		c.Revert = h
		if out, err := git(ctx, t.Dir, "rev-list", "--parents", "-n", "1", h); err == nil && len(strings.Fields(out)) > 2 && c.Mainline == 0 {
			c.Mainline = 1 // a merge: reverted against its first parent, as a bisection compares it
		}
		if _, err := git(ctx, t.Dir, "merge-base", "--is-ancestor", h, baseHash); err != nil {
			return "", &ConflictError{Change: c, Base: baseHash, Detail: "the commit is not in the base's history"}
		}
		key += " revert " + h + fmt.Sprint(" -m", c.Mainline)
	} else {
		if patch, err = os.ReadFile(c.Patch); err != nil {
			return "", fmt.Errorf("--patch: %v", err)
		}
		sum := sha256.Sum256(patch)
		key += " patch " + hex.EncodeToString(sum[:])
	}
	sum := sha256.Sum256([]byte(key))
	id := hex.EncodeToString(sum[:8])
	ref := "refs/kbisect/derived/" + id
	if out, err := git(ctx, t.Dir, "rev-parse", "--verify", "--quiet", ref+"^{commit}"); err == nil {
		return strings.TrimSpace(out), nil // made before
	}

	scratch := filepath.Join(t.GitDir, "kbisect", "scratch-"+id)
	_ = os.RemoveAll(scratch)
	if _, err := git(ctx, t.Dir, "worktree", "add", "--detach", "--force", scratch, baseHash); err != nil {
		return "", err
	}
	defer func() {
		_, _ = git(ctx, t.Dir, "worktree", "remove", "--force", scratch)
		_ = os.RemoveAll(scratch)
	}()
	date, err := git(ctx, scratch, "show", "-s", "--format=%cI", baseHash)
	if err != nil {
		return "", err
	}
	env := []string{"GIT_COMMITTER_NAME=kbisect", "GIT_COMMITTER_EMAIL=kbisect@localhost",
		"GIT_COMMITTER_DATE=" + strings.TrimSpace(date)}
	// The user's signing and hooks are theirs: a derived commit is a
	// scratch kernel's, made the same way on every machine.
	quiet := []string{"-c", "commit.gpgSign=false", "-c", "core.hooksPath=/dev/null"}
	if c.Revert != "" {
		env = append(env, "GIT_AUTHOR_NAME=kbisect", "GIT_AUTHOR_EMAIL=kbisect@localhost", "GIT_AUTHOR_DATE="+strings.TrimSpace(date))
		args := []string{"revert", "--no-edit"}
		if c.Mainline > 0 {
			args = append(args, "-m", fmt.Sprint(c.Mainline))
		}
		if _, err := gitEnv(ctx, scratch, env, append(append(quiet, args...), c.Revert)...); err != nil {
			return "", conflict(ctx, scratch, c, baseHash, err)
		}
	} else if isMail(patch) {
		if _, err := gitEnv(ctx, scratch, env, append(quiet, "am", "--3way", "--keep-cr", c.Patch)...); err != nil {
			return "", conflict(ctx, scratch, c, baseHash, err)
		}
	} else {
		if _, err := git(ctx, scratch, "apply", "--index", c.Patch); err != nil {
			return "", conflict(ctx, scratch, c, baseHash, err)
		}
		env = append(env, "GIT_AUTHOR_NAME=kbisect", "GIT_AUTHOR_EMAIL=kbisect@localhost", "GIT_AUTHOR_DATE="+strings.TrimSpace(date))
		msg := "kbisect: apply " + filepath.Base(c.Patch)
		if _, err := gitEnv(ctx, scratch, env, append(quiet, "commit", "--no-verify", "-q", "-m", msg)...); err != nil {
			return "", err
		}
	}
	out, err := git(ctx, scratch, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	made := strings.TrimSpace(out)
	if _, err := git(ctx, t.Dir, "update-ref", ref, made); err != nil {
		return "", err
	}
	return made, nil
}

func (t *Tree) resolve(ctx context.Context, rev string) (string, error) {
	if strings.HasPrefix(rev, "-") {
		return "", fmt.Errorf("%q is not a revision", rev)
	}
	out, err := git(ctx, t.Dir, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("%s has no commit %q", t.Dir, rev)
	}
	return strings.TrimSpace(out), nil
}

// isMail says whether a patch is a git format-patch mail (git am's).
func isMail(patch []byte) bool {
	return strings.HasPrefix(string(patch), "From ") || regexp.MustCompile(`(?m)^Subject: `).Match(patch[:min(len(patch), 4096)])
}

var applyFailed = regexp.MustCompile(`(?m)^error: (?:patch failed: ([^:\n]+):\d+|([^:\n]+): (?:does not exist in index|No such file or directory|already exists in (?:index|working directory)|patch does not apply))`)

// doesNotApply is git saying a change does not fit its base.
var doesNotApply = regexp.MustCompile(`(?i)does not apply|patch failed|could not apply|corrupt patch|conflict|no valid patches|patch is empty`)

// conflict turns a failed revert or patch into a ConflictError naming the
// files, and leaves the scratch worktree clean for its removal.
func conflict(ctx context.Context, scratch string, c Change, base string, err error) error {
	var ce *CommandError
	if !errors.As(err, &ce) {
		return err
	}
	e := &ConflictError{Change: c, Base: base}
	if out, derr := git(ctx, scratch, "diff", "--name-only", "--diff-filter=U"); derr == nil {
		e.Files = strings.Fields(out)
	}
	for _, m := range applyFailed.FindAllStringSubmatch(ce.Stderr, -1) {
		f := m[1] + m[2]
		if !slices.Contains(e.Files, f) {
			e.Files = append(e.Files, f)
		}
	}
	_, _ = git(ctx, scratch, "revert", "--abort")
	_, _ = git(ctx, scratch, "am", "--abort")
	if len(e.Files) == 0 {
		if !doesNotApply.MatchString(ce.Stderr) {
			// Not the change: git itself failed (a lock, the disk).
			return fmt.Errorf("%s on %s: %w", c, commitid.Short(base), err)
		}
		e.Detail = firstLine(ce.Stderr)
	}
	return e
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
