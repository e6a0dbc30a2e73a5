package worktree

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// deriveRepo is a tree of three commits on main: file gets "one", "two",
// "three"; the last also adds other. The user has an edit and an
// untracked file in the checkout.
func deriveRepo(t *testing.T) (dir string, commits []string, g func(args ...string) string) {
	t.Helper()
	dir, commits, g = commitSeries(t, "other", "one\n", "two\n", "three\n")
	os.WriteFile(filepath.Join(dir, "other"), []byte("the user's edit\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "untracked"), []byte("mine\n"), 0o644)
	return dir, commits, g
}

func TestDeriveRevertsInAScratchTreeAndMakesTheSameCommitAgain(t *testing.T) {
	dir, c, g := deriveRepo(t)
	ctx := context.Background()
	statusBefore := g("status", "--porcelain")
	made, err := Derive(ctx, dir, "main", Change{Revert: c[2]})
	if err != nil {
		t.Fatal(err)
	}
	if got := g("show", made+":file"); got != "two" {
		t.Errorf("base with the last commit reverted has file %q", got)
	}
	if g("rev-parse", made+"^") != c[2] {
		t.Errorf("the revert's parent is not the base")
	}
	if g("status", "--porcelain") != statusBefore || g("rev-parse", "HEAD") != c[2] {
		t.Errorf("the user's checkout changed:\n%s", g("status", "--porcelain"))
	}
	if strings.Count(g("worktree", "list"), "\n") != 0 {
		t.Errorf("a scratch worktree was left: %s", g("worktree", "list"))
	}
	// Again, even after the ref is gone: the same inputs make the same commit.
	g("update-ref", "-d", "refs/kbisect/derived/"+strings.TrimPrefix(g("for-each-ref", "--format=%(refname:short)", "refs/kbisect/derived/"), "kbisect/derived/"))
	again, err := Derive(ctx, dir, c[2], Change{Revert: c[2][:10]})
	if err != nil || again != made {
		t.Errorf("made again: %s, %v; first %s", again, err, made)
	}
}

func TestDeriveNamesTheFilesARevertConflictsIn(t *testing.T) {
	dir, c, _ := deriveRepo(t)
	_, err := Derive(context.Background(), dir, "main", Change{Revert: c[1]})
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Files) != 1 || ce.Files[0] != "file" {
		t.Fatalf("want a conflict in file, got %v", err)
	}
	if !strings.Contains(err.Error(), "revert "+c[1]+" on "+c[2][:12]+" does not apply: conflicts in file") {
		t.Errorf("message: %v", err)
	}
}

func TestDeriveAppliesAMailWithGitAmAndADiffWithGitApply(t *testing.T) {
	dir, c, g := deriveRepo(t)
	ctx := context.Background()
	mail := filepath.Join(t.TempDir(), "0001.patch")
	os.WriteFile(mail, []byte(g("format-patch", "--stdout", "-1", c[2])+"\n"), 0o644)
	made, err := Derive(ctx, dir, c[1], Change{Patch: mail})
	if err != nil {
		t.Fatal(err)
	}
	if g("show", made+":file") != "three" || g("log", "-1", "--format=%an %s", made) != "T three" {
		t.Errorf("git am made %s: %q", made, g("log", "-1", "--format=%an %s", made))
	}

	diff := filepath.Join(t.TempDir(), "fix.diff")
	os.WriteFile(diff, []byte("--- a/file\n+++ b/file\n@@ -1 +1 @@\n-three\n+four\n"), 0o644)
	made, err = Derive(ctx, dir, "main", Change{Patch: diff})
	if err != nil || g("show", made+":file") != "four" {
		t.Fatalf("git apply: %v", err)
	}
	_, err = Derive(ctx, dir, c[0], Change{Patch: diff})
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Files) != 1 || ce.Files[0] != "file" {
		t.Errorf("a diff that does not apply: %v", err)
	}
}

func TestDeriveRefusesToRevertACommitTheBaseDoesNotHave(t *testing.T) {
	dir, c, _ := deriveRepo(t)
	_, err := Derive(context.Background(), dir, c[0], Change{Revert: c[2]})
	if err == nil || !strings.Contains(err.Error(), "not in the base's history") {
		t.Errorf("got %v", err)
	}
}

// TestDerivePatchPathIsTheUsersAndSigningIsNot: a relative patch path is
// the user's working directory's (git runs in the scratch tree), and a
// repository that signs commits (with a signer that fails) still derives.
func TestDerivePatchPathIsTheUsersAndSigningIsNot(t *testing.T) {
	dir, _, g := deriveRepo(t)
	g("config", "commit.gpgSign", "true")
	g("config", "gpg.program", "false")
	here := t.TempDir()
	os.WriteFile(filepath.Join(here, "fix.diff"), []byte("--- a/file\n+++ b/file\n@@ -1 +1 @@\n-three\n+four\n"), 0o644)
	t.Chdir(here)
	made, err := Derive(context.Background(), dir, "main", Change{Patch: "fix.diff"})
	if err != nil || g("show", made+":file") != "four" {
		t.Fatalf("relative patch: %v", err)
	}
	reverted, err := Derive(context.Background(), dir, "main", Change{Revert: "main"})
	if err != nil || g("show", reverted+":file") != "two" {
		t.Errorf("revert with signing on: %v", err)
	}
}
