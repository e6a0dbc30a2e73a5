package nightly

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sharedTree is a tree whose git directory has the nightly's directory,
// and a bare remote with one release tag, whose commit it returns too.
func sharedTree(t *testing.T) (tree, gitDir, remote, head string) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	gitIn(t, src, "init", "-q", "-b", "main")
	gitIn(t, src, "commit", "-q", "--allow-empty", "-m", "v6.12.1")
	gitIn(t, src, "tag", "v6.12.1")
	head = gitIn(t, src, "rev-parse", "HEAD")
	remote = filepath.Join(dir, "stable.git")
	gitIn(t, dir, "clone", "-q", "--bare", src, remote)
	tree = filepath.Join(dir, "tree")
	gitIn(t, dir, "init", "-q", tree)
	gitDir = filepath.Join(tree, ".git")
	if err := os.MkdirAll(filepath.Join(gitDir, "kbisect"), 0o755); err != nil {
		t.Fatal(err)
	}
	return tree, gitDir, remote, head
}

// TestAFetchFromARemoteThatStopsAnsweringEndsAtItsDeadline: an HTTP
// remote that accepts the connection and never answers; git fetch (and
// its git-remote-http) is killed at the fetch's deadline, the error says
// so and what to check, and the trees' fetch lock is free again.
func TestAFetchFromARemoteThatStopsAnsweringEndsAtItsDeadline(t *testing.T) {
	tree, gitDir, _, _ := sharedTree(t)
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer srv.Close()
	defer close(stop) // before Close, which waits for the handler
	// Without the fetch's own deadline, only this one would end it.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := fetchReleases(ctx, fetchRequest{tree: tree, gitDir: gitDir, remote: srv.URL + "/stable.git", branch: "main", timeout: 2 * time.Second})
	if err == nil {
		t.Fatal("a fetch from a remote that never answers succeeded")
	}
	for _, want := range []string{"git fetch did not finish within 2s and was killed", "git ls-remote " + srv.URL + "/stable.git"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	unlock, err := lockFetch(ctx, filepath.Join(gitDir, "kbisect", "fetch.lock"), tree, time.Millisecond)
	if err != nil {
		t.Fatalf("the fetch lock is still held after the fetch ended: %v", err)
	}
	unlock()
}

// TestAFetchWaitsForTheTreesLockOnlyUntilItsDeadline: another machine's
// fetch into the same tree holds the lock and never lets go; the night
// waits for it only until the lock's deadline, then says who holds it.
// Once the lock is free, the same fetch works.
func TestAFetchWaitsForTheTreesLockOnlyUntilItsDeadline(t *testing.T) {
	tree, gitDir, remote, head := sharedTree(t)
	path := filepath.Join(gitDir, "kbisect", "fetch.lock")
	other, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := other.WriteString("pid 4242 on lab-7 since 2026-12-01T01:00:00Z\n"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	req := fetchRequest{tree: tree, gitDir: gitDir, remote: remote, branch: "main", lockWait: time.Second}
	_, err = fetchReleases(ctx, req)
	if err == nil {
		t.Fatal("the fetch went on while another held the tree's lock")
	}
	for _, want := range []string{"another fetch into " + tree, path, "for more than 1s", "pid 4242 on lab-7 since 2026-12-01T01:00:00Z"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	got, err := fetchReleases(ctx, req)
	if err != nil || got.String() != head {
		t.Errorf("with the lock free: %s, %v; want %s", got, err, head)
	}
}
