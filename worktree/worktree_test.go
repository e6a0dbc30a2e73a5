package worktree

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitIn runs git in dir as a test author and returns its output, trimmed;
// a git that fails fails the test.
func gitIn(t *testing.T, dir string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@e")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
}

// commitSeries makes a repository whose main has one commit per content
// of file, the last one also adding extra. It returns the work tree, the
// commits (oldest first) and git in the work tree.
func commitSeries(t *testing.T, extra string, contents ...string) (string, []string, func(args ...string) string) {
	t.Helper()
	dir := t.TempDir()
	g := gitIn(t, dir)
	g("init", "-q", "-b", "main")
	var commits []string
	for i, content := range contents {
		os.WriteFile(filepath.Join(dir, "file"), []byte(content), 0o644)
		if i == len(contents)-1 {
			os.WriteFile(filepath.Join(dir, extra), []byte("x\n"), 0o644)
		}
		g("add", ".")
		g("commit", "-q", "-m", strings.TrimSpace(content))
		commits = append(commits, g("rev-parse", "HEAD"))
	}
	return dir, commits, g
}

// repo makes a work tree with two commits on branch main.
func repo(t *testing.T) (string, []string) {
	t.Helper()
	dir, commits, _ := commitSeries(t, "added", "one\n", "two\n")
	return dir, commits
}

func TestCheckoutKeepsUntrackedFilesAndRestoreFindsTheBranch(t *testing.T) {
	ctx := context.Background()
	dir, commits := repo(t)
	tree, err := Open(ctx, filepath.Join(dir, "."))
	if err != nil {
		t.Fatal(err)
	}
	if tree.Dir != dir || tree.GitDir != filepath.Join(dir, ".git") {
		t.Errorf("Open: %+v", tree)
	}
	os.WriteFile(filepath.Join(dir, ".config"), []byte("CONFIG_X=y\n"), 0o644)
	head, err := tree.Head(ctx)
	if err != nil || head.Branch != "refs/heads/main" || head.Commit != commits[1] {
		t.Fatalf("Head = %+v, %v", head, err)
	}
	if err := tree.Checkout(ctx, commits[0]); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "file")); string(data) != "one\n" {
		t.Errorf("file after checkout: %q", data)
	}
	if _, err := os.Stat(filepath.Join(dir, "added")); !os.IsNotExist(err) {
		t.Errorf("a file of the newer commit is still there: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, ".config")); string(data) != "CONFIG_X=y\n" {
		t.Errorf("untracked .config after checkout: %q", data)
	}
	if err := tree.Restore(ctx, head); err != nil {
		t.Fatal(err)
	}
	if now, _ := tree.Head(ctx); now != head {
		t.Errorf("after Restore HEAD is %+v, want %+v", now, head)
	}
}

func TestChangesSeesTrackedEditsOnly(t *testing.T) {
	ctx := context.Background()
	dir, _ := repo(t)
	tree, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "untracked"), []byte("u\n"), 0o644)
	if err := tree.RequireClean(ctx); err != nil {
		t.Errorf("an untracked file made the tree dirty: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "file"), []byte("edited\n"), 0o644)
	err = tree.RequireClean(ctx)
	if err == nil || !strings.Contains(err.Error(), "file") || !strings.Contains(err.Error(), "stash") {
		t.Errorf("RequireClean on an edited file: %v", err)
	}
}

func TestCheckoutRefusesToOverwriteAnUntrackedFile(t *testing.T) {
	ctx := context.Background()
	dir, commits := repo(t)
	tree, _ := Open(ctx, dir)
	if err := tree.Checkout(ctx, commits[0]); err != nil {
		t.Fatal(err)
	}
	// "added" is untracked at commits[0] and tracked at commits[1].
	os.WriteFile(filepath.Join(dir, "added"), []byte("mine\n"), 0o644)
	err := tree.Checkout(ctx, commits[1])
	var ce *CommandError
	if err == nil || !errors.As(err, &ce) || ce.Exit == 0 || !strings.Contains(err.Error(), "added") {
		t.Fatalf("checkout over an untracked file: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "added")); string(data) != "mine\n" {
		t.Errorf("the untracked file was overwritten: %q", data)
	}
}

func TestInProgressNamesAGitBisect(t *testing.T) {
	ctx := context.Background()
	dir, commits := repo(t)
	tree, _ := Open(ctx, dir)
	if err := tree.RequireNoOperation(); err != nil {
		t.Fatalf("fresh tree: %v", err)
	}
	gitIn(t, dir)("bisect", "start", commits[1], commits[0])
	err := tree.RequireNoOperation()
	if err == nil || !strings.Contains(err.Error(), "git bisect reset") {
		t.Errorf("during a git bisect: %v", err)
	}
}

func TestLockKeepsASecondRunOut(t *testing.T) {
	dir, _ := repo(t)
	tree, _ := Open(context.Background(), dir)
	unlock, err := tree.Lock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.Lock(); err == nil || !strings.Contains(err.Error(), "another kbisect") {
		t.Fatalf("second lock: %v", err)
	}
	unlock()
	unlock2, err := tree.Lock()
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}
