package bisect

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/internal/testrepo"
)

// benchRepo returns a repository with a generated kernel-scale history
// (1,000,000 commits, subsystem trees, octopus and criss-cross merges) and
// a good/bad pair whose range holds about 15,000 commits. It is made once
// into $KBISECT_BENCH_REPO (default /tmp/kbisect-bench): generating it takes
// a few minutes.
func benchRepo(b *testing.B) (dir, bad, good string) {
	b.Helper()
	if os.Getenv("KBISECT_BENCH") == "" {
		b.Skip("kernel-scale benchmark: set KBISECT_BENCH=1 (or run `just bench`); it builds a 1,000,000-commit repository once")
	}
	dir = os.Getenv("KBISECT_BENCH_REPO")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "kbisect-bench")
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "kbisect-bench-ready")); err != nil {
		os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		began := time.Now()
		h := testrepo.Generate(42, testrepo.Shape{Commits: 1_000_000, Subsystems: 12, Octopus: true, CrissCross: true, TiePercent: 5, SkewPercent: 1})
		if _, err := h.Write(dir, func(int) map[string]string { return nil }); err != nil {
			b.Fatal(err)
		}
		b.Logf("generated %d commits in %v", len(h.Commits), time.Since(began))
		if err := os.WriteFile(filepath.Join(dir, ".git", "kbisect-bench-ready"), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	bad = gitIn(b, dir, "rev-parse", "master")
	// The first-parent ancestor of master whose range is closest to 15,000.
	lo, hi := 1, 200000
	for lo < hi {
		mid := (lo + hi) / 2
		n, _ := strconv.Atoi(gitIn(b, dir, "rev-list", "--count", "master", "^master~"+strconv.Itoa(mid)))
		if n < 15000 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	good = gitIn(b, dir, "rev-parse", "master~"+strconv.Itoa(lo))
	return dir, bad, good
}

// withCommitGraph makes sure the repository has (or lacks) a commit-graph
// file, keeping a written one aside for the other runs.
func withCommitGraph(b *testing.B, dir string, want bool) {
	path := filepath.Join(dir, ".git", "objects", "info", "commit-graph")
	aside := filepath.Join(dir, ".git", "commit-graph.aside")
	_, err := os.Stat(path)
	has := err == nil
	switch {
	case want && !has:
		if _, err := os.Stat(aside); err == nil {
			if err := os.Rename(aside, path); err != nil {
				b.Fatal(err)
			}
			return
		}
		gitIn(b, dir, "commit-graph", "write", "--reachable")
	case !want && has:
		if err := os.Rename(path, aside); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFirstMidpoint measures the first step of a bisection on the
// kernel-scale history — open the repository, compute the candidates and
// choose the midpoint — next to `git rev-list --bisect` on the same range.
func BenchmarkFirstMidpoint(b *testing.B) {
	dir, bad, good := benchRepo(b)
	for _, graph := range []bool{false, true} {
		name := map[bool]string{false: "objects", true: "commit-graph"}[graph]
		b.Run("kbisect/"+name, func(b *testing.B) {
			withCommitGraph(b, dir, graph)
			want := gitIn(b, dir, "rev-list", "--bisect", bad, "^"+good)
			var n int
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				g, err := OpenGraph(context.Background(), dir)
				if err != nil {
					b.Fatal(err)
				}
				if g.HasCommitGraph() != graph {
					b.Fatalf("commit-graph in use: %v, want %v", g.HasCommitGraph(), graph)
				}
				s := NewSession(g, plumbing.NewHash(bad), []plumbing.Hash{plumbing.NewHash(good)}, false)
				st, err := s.Next()
				if err != nil {
					b.Fatal(err)
				}
				if st.Kind != StepTest {
					b.Fatalf("step %v", st.Kind)
				}
				if i == 0 && st.Commit.String() != want {
					b.Fatalf("midpoint %s, git's %s", st.Commit, want)
				}
				n = len(g.nodes)
				g.Close()
			}
			b.ReportMetric(float64(n), "commits-read")
		})
		b.Run("git/"+name, func(b *testing.B) {
			withCommitGraph(b, dir, graph)
			for i := 0; i < b.N; i++ {
				gitIn(b, dir, "-c", "core.commitGraph="+strconv.FormatBool(graph), "rev-list", "--bisect", bad, "^"+good)
			}
		})
	}
	fmt.Fprintf(os.Stderr, "range: %s ^%s (%s commits)\n", bad[:12], good[:12], gitIn(b, dir, "rev-list", "--count", bad, "^"+good))
}

// BenchmarkMidpointGenerated is the same step on a 20,000-commit history
// made in a temporary directory, small enough for any run of -bench.
func BenchmarkMidpointGenerated(b *testing.B) {
	h := testrepo.Generate(7, testrepo.Shape{Commits: 20000, Subsystems: 6, Octopus: true, CrissCross: true, TiePercent: 5})
	dir := b.TempDir()
	hashes, err := h.Write(dir, func(int) map[string]string { return nil })
	if err != nil {
		b.Fatal(err)
	}
	bad, good := hashes[h.Mainline], hashes[len(hashes)/4]
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g, err := OpenGraph(context.Background(), dir)
		if err != nil {
			b.Fatal(err)
		}
		s := NewSession(g, plumbing.NewHash(bad), []plumbing.Hash{plumbing.NewHash(good)}, false)
		if _, err := s.Next(); err != nil {
			b.Fatal(err)
		}
		g.Close()
	}
}
