package worktree

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"os/exec"
	"strings"
	"testing"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// benchTree makes a work tree of 20,000 files in 400 directories and 60
// commits after the first, each changing 150 files: the per-step checkout
// cost of a bisection on a kernel-like tree, without the kernel.
func benchTree(b *testing.B) (string, []string) {
	b.Helper()
	dir := b.TempDir()
	if out, err := exec.Command("git", "init", "-q", "-b", "main", dir).CombinedOutput(); err != nil {
		b.Fatalf("%v %s", err, out)
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = dir
	stdin, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(stdin, 1<<20)
	rng := rand.New(rand.NewSource(1))
	const files, commits, changed = 20000, 61, 150
	for c := 0; c < commits; c++ {
		fmt.Fprintf(w, "commit refs/heads/main\nmark :%d\ncommitter T <t@e> %d +0000\ndata 2\nc%d\n", c+1, 1700000000+c, c%10)
		if c > 0 {
			fmt.Fprintf(w, "from :%d\n", c)
		}
		n := changed
		if c == 0 {
			n = files
		}
		for i := 0; i < n; i++ {
			f := i
			if c > 0 {
				f = rng.Intn(files)
			}
			content := fmt.Sprintf("/* file %d, version %d */\n%s", f, c, strings.Repeat("int x;\n", 20+f%50))
			fmt.Fprintf(w, "M 100644 inline d%03d/f%05d.c\ndata %d\n%s\n", f%400, f, len(content), content)
		}
	}
	w.Flush()
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command("git", "-C", dir, "rev-list", "--reverse", "main").Output()
	if err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", dir, "checkout", "-q", "-f", "main").CombinedOutput(); err != nil {
		b.Fatalf("%v %s", err, out)
	}
	return dir, strings.Fields(string(out))
}

// BenchmarkCheckoutStep compares one bisection step's checkout — git
// checkout, as kbisect does it, and go-git's Checkout — between commits 60
// steps apart (about 8,000 files differ) and 1 step apart (150 files).
func BenchmarkCheckoutStep(b *testing.B) {
	dir, commits := benchTree(b)
	pairs := map[string][2]string{
		"far":      {commits[0], commits[60]},
		"adjacent": {commits[30], commits[31]},
	}
	for _, name := range []string{"far", "adjacent"} {
		pair := pairs[name]
		b.Run("git/"+name, func(b *testing.B) {
			tree, err := Open(context.Background(), dir)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i++ {
				if err := tree.Checkout(context.Background(), pair[i%2]); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("go-git/"+name, func(b *testing.B) {
			repo, err := gogit.PlainOpen(dir)
			if err != nil {
				b.Fatal(err)
			}
			wt, err := repo.Worktree()
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i++ {
				if err := wt.Checkout(&gogit.CheckoutOptions{Hash: plumbing.NewHash(pair[i%2])}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
