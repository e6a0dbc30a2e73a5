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
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/configs"
)

// Bounds of a night's fetch: a remote that stops answering, or another
// machine's fetch into the same tree that hangs, must not hang the night.
const (
	fetchTimeout = time.Hour
	// fetchLockWait is longer than fetchTimeout: a fetch that holds the
	// lock ends within that.
	fetchLockWait = fetchTimeout + 10*time.Minute
)

// fetchRequest is one fetch of the releases: the branch (when given) and
// the tags of remote into tree, whose git directory is gitDir.
type fetchRequest struct {
	tree, gitDir, remote, branch string
	// timeout bounds git fetch, lockWait the wait for another fetch into
	// the tree (0: fetchTimeout, fetchLockWait).
	timeout, lockWait time.Duration
}

// fetchReleases fetches the releases with git, within the request's
// bounds and ctx; it returns the fetched branch's head (zero without a
// branch).
func fetchReleases(ctx context.Context, f fetchRequest) (plumbing.Hash, error) {
	if f.timeout <= 0 {
		f.timeout = fetchTimeout
	}
	if f.lockWait <= 0 {
		f.lockWait = fetchLockWait
	}
	remote, credentials := splitCredentials(f.remote)
	git := func(ctx context.Context, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", f.tree}, args...)...)
		cmd.Env = append(gitEnviron(), "GIT_TERMINAL_PROMPT=0") // a prompt would hang the night
		cmd.Env = append(cmd.Env, credentials...)
		// git fetch runs helpers (ssh, git-remote-https) that hold its
		// pipes: the deadline ends them all.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = 5 * time.Second
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
	if f.branch != "" {
		ref = "refs/remotes/kbisect-nightly/" + f.branch
		args = append(args, "+refs/heads/"+f.branch+":"+ref)
	}
	// Machines sharing the tree fetch one at a time: git locks each ref.
	unlock, err := lockFetch(ctx, filepath.Join(f.gitDir, "kbisect", "fetch.lock"), f.tree, f.lockWait)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	fetchCtx, cancel := context.WithTimeout(ctx, f.timeout)
	_, err = git(fetchCtx, args...)
	expired := fetchCtx.Err() != nil && ctx.Err() == nil
	cancel()
	unlock()
	switch {
	case expired:
		return plumbing.ZeroHash, fmt.Errorf("fetching %s into %s: git fetch did not finish within %s and was killed: "+
			"check that the remote answers (git ls-remote %s), then run the night again", remoteName(remote), f.tree, configs.Duration(f.timeout), remoteName(remote))
	case err != nil:
		return plumbing.ZeroHash, fmt.Errorf("fetching %s into %s: %w", remoteName(remote), f.tree, err)
	}
	if ref == "" {
		return plumbing.ZeroHash, nil
	}
	out, err := git(ctx, "rev-parse", "--verify", ref+"^{commit}")
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("%s after the fetch: %w", ref, err)
	}
	return plumbing.NewHash(strings.TrimSpace(string(out))), nil
}

// splitCredentials takes the user and password (a token) out of a
// remote's URL: git gets the URL without them, and them through its
// environment, where a credential helper given there (it is no secret)
// reads them when the server asks. Neither appears in git's argv (ps,
// /proc/PID/cmdline), in what git prints, or in what kbisect logs. The
// helpers of the user's git config are cleared first, so that none of
// them stores the token. An ssh URL keeps its user (ssh needs it, and git
// never uses a password there).
func splitCredentials(remote string) (string, []string) {
	u, err := url.Parse(remote)
	if err != nil || u.Scheme == "" || u.Host == "" || u.User == nil {
		return remote, nil
	}
	user := u.User.Username()
	pass, hasPass := u.User.Password()
	if u.Scheme != "http" && u.Scheme != "https" {
		if !hasPass {
			return remote, nil
		}
		u.User = url.User(user)
		return u.String(), nil
	}
	u.User = nil
	n, _ := strconv.Atoi(os.Getenv("GIT_CONFIG_COUNT")) // the caller's own, kept
	helper := `!f() { test "$1" = get || exit 0; echo "username=$KBISECT_GIT_USERNAME"; ` +
		`if [ -n "${KBISECT_GIT_PASSWORD+set}" ]; then echo "password=$KBISECT_GIT_PASSWORD"; fi; }; f`
	env := []string{
		fmt.Sprintf("GIT_CONFIG_COUNT=%d", n+2),
		fmt.Sprintf("GIT_CONFIG_KEY_%d=credential.helper", n), fmt.Sprintf("GIT_CONFIG_VALUE_%d=", n),
		fmt.Sprintf("GIT_CONFIG_KEY_%d=credential.helper", n+1), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", n+1, helper),
		"KBISECT_GIT_USERNAME=" + user,
	}
	if hasPass {
		env = append(env, "KBISECT_GIT_PASSWORD="+pass)
	}
	return u.String(), env
}

var remoteVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandRemote puts the values of the ${NAME}s of --remote in, from
// lookup: a token given as https://ci:${STABLE_TOKEN}@host/… is in no
// command line, kbisect's own included. A value in the URL's user and
// password is escaped for it (a token may hold / or @).
func expandRemote(remote string, lookup func(string) (string, bool)) (string, error) {
	userEnd := -1 // where the user and password end, in a URL with them
	if _, rest, ok := strings.Cut(remote, "://"); ok {
		authority, _, _ := strings.Cut(rest, "/")
		if at := strings.LastIndex(authority, "@"); at >= 0 {
			userEnd = len(remote) - len(rest) + at
		}
	}
	var missing []string
	var out strings.Builder
	last := 0
	for _, m := range remoteVar.FindAllStringSubmatchIndex(remote, -1) {
		out.WriteString(remote[last:m[0]])
		last = m[1]
		name := remote[m[2]:m[3]]
		v, ok := lookup(name)
		if !ok {
			missing = append(missing, name)
		}
		if m[0] < userEnd {
			v = escapeUserinfo(v)
		}
		out.WriteString(v)
	}
	out.WriteString(remote[last:])
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out.String(), nil
}

// escapeUserinfo percent-escapes all but the unreserved characters.
func escapeUserinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// gitEnviron is this process's environment without credentials meant for
// another remote.
func gitEnviron() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KBISECT_GIT_") {
			out = append(out, kv)
		}
	}
	return out
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
