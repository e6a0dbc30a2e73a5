package nightly

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// gitIn runs git in dir and returns what it printed.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestTheRemotesTokenStaysOutOfGitsArgvAndTheMessages fetches over HTTP
// from git's own http-backend behind basic authentication, with the
// token in the remote's URL: the fetch works, and no git command line
// (recorded by a git first in PATH that logs its arguments) nor any
// message holds the token, also when the server refuses it.
func TestTheRemotesTokenStaysOutOfGitsArgvAndTheMessages(t *testing.T) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	gitIn(t, src, "init", "-q", "-b", "main")
	gitIn(t, src, "commit", "-q", "--allow-empty", "-m", "v6.12.1")
	gitIn(t, src, "tag", "v6.12.1")
	head := gitIn(t, src, "rev-parse", "HEAD")
	root := filepath.Join(dir, "srv")
	gitIn(t, dir, "clone", "-q", "--bare", src, filepath.Join(root, "stable.git"))

	const user, token = "ci", "glpat-Zq9xTOKENvalue42"
	backend := &cgi.Handler{Path: gitPath, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="stable"`)
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	defer srv.Close()

	// A git first in PATH that records its arguments, then runs git.
	bin, argv := filepath.Join(dir, "bin"), filepath.Join(dir, "argv.log")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' \"$*\" >> %s\nexec %s \"$@\"\n", argv, gitPath)
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	// The user's git config has a helper that stores what worked: it
	// must never get the token.
	stored, global := filepath.Join(dir, "stored-credentials"), filepath.Join(dir, "gitconfig")
	if err := os.WriteFile(global, []byte("[credential]\n\thelper = store --file="+stored+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", global)

	tree := filepath.Join(dir, "tree")
	gitIn(t, dir, "init", "-q", tree)
	gitDir := filepath.Join(tree, ".git")
	if err := os.MkdirAll(filepath.Join(gitDir, "kbisect"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	remote := strings.Replace(srv.URL, "http://", "http://"+user+":"+token+"@", 1) + "/stable.git"
	got, err := fetchReleases(ctx, fetchRequest{tree: tree, gitDir: gitDir, remote: remote, branch: "main"})
	if err != nil {
		t.Fatalf("fetch with the token: %v", err)
	}
	if got.String() != head || gitIn(t, tree, "rev-parse", "v6.12.1") != head {
		t.Errorf("fetched %s, want %s with its tag", got, head)
	}

	// A token the server refuses: the fetch fails, saying so without it.
	wrong := strings.Replace(remote, token, "wrong-"+token[:8], 1)
	_, err = fetchReleases(ctx, fetchRequest{tree: tree, gitDir: gitDir, remote: wrong, branch: "main"})
	if err == nil || strings.Contains(err.Error(), "wrong-"+token[:8]) || strings.Contains(err.Error(), token) {
		t.Errorf("fetch with a refused token: %v", err)
	}

	calls, err := os.ReadFile(argv)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(calls), "fetch") {
		t.Fatalf("git never ran through the recording wrapper:\n%s", calls)
	}
	if strings.Contains(string(calls), token) || strings.Contains(string(calls), token[:8]) {
		t.Errorf("the token is in git's argv:\n%s", calls)
	}
	if b, err := os.ReadFile(stored); err == nil && strings.Contains(string(b), token) {
		t.Errorf("the user's credential helper stored the token: %s", b)
	}
	if name := remoteName(remote); strings.Contains(name, token) {
		t.Errorf("the history names the remote %s", name)
	}
}

// TestARemotesTokenComesFromTheEnvironment: --remote names the token as
// ${NAME}, so that it is on no command line, kbisect's included.
func TestARemotesTokenComesFromTheEnvironment(t *testing.T) {
	env := map[string]string{"STABLE_TOKEN": "t0k/en"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	got, err := expandRemote("https://ci:${STABLE_TOKEN}@git.example.org/stable.git", lookup)
	if err != nil || got != "https://ci:t0k%2Fen@git.example.org/stable.git" {
		t.Errorf("%q %v", got, err)
	}
	u, vars := splitCredentials(got)
	if u != "https://git.example.org/stable.git" || !slices.Contains(vars, "KBISECT_GIT_PASSWORD=t0k/en") || !slices.Contains(vars, "KBISECT_GIT_USERNAME=ci") {
		t.Errorf("%s %q", u, vars)
	}
	if _, err := expandRemote("https://ci:${NIGHTLY_TOKEN}@git.example.org/stable.git", lookup); err == nil || err.Error() != "environment variable NIGHTLY_TOKEN is not set" {
		t.Errorf("unset: %v", err)
	}
}
