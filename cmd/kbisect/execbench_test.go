package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExecBenchBesideGitBisectRun times a whole `kbisect run --exec`
// bisection beside `git bisect run` on a real repository, in alternating
// rounds, and prints the medians: the whole bisection, and the time until
// the test command first runs. It reports numbers and asserts only that
// both test the same commits and name the same first bad one.
//
// KBISECT_BENCH_UBOOT is a clean clone of u-boot with a work tree
// (`just bench-exec`); KBISECT_BENCH_GOOD and KBISECT_BENCH_BAD the range
// (default v2023.07..v2024.07: 6,621 commits, 497 merges),
// KBISECT_BENCH_FIRST_BAD the commit the test calls the first bad one
// (default: the middle of `git rev-list` of the range), KBISECT_BENCH_ROUNDS
// the rounds (default 5, after one warm-up), and KBISECT_BENCH_BIN a kbisect
// binary to time instead of this tree's; KBISECT_BENCH_OLD, another kbisect
// (an older build) timed in the same rounds.
func TestExecBenchBesideGitBisectRun(t *testing.T) {
	repo := os.Getenv("KBISECT_BENCH_UBOOT")
	if repo == "" {
		t.Skip("real-repository benchmark: set KBISECT_BENCH_UBOOT to a clean u-boot clone (or run `just bench-exec`)")
	}
	good, bad := envOr("KBISECT_BENCH_GOOD", "v2023.07"), envOr("KBISECT_BENCH_BAD", "v2024.07")
	rounds, err := strconv.Atoi(envOr("KBISECT_BENCH_ROUNDS", "5"))
	if err != nil || rounds < 1 {
		t.Fatalf("KBISECT_BENCH_ROUNDS=%q: want a positive number", os.Getenv("KBISECT_BENCH_ROUNDS"))
	}
	bin, old := os.Getenv("KBISECT_BENCH_BIN"), os.Getenv("KBISECT_BENCH_OLD")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "kbisect")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	if st := benchGit(t, repo, "status", "--porcelain", "--untracked-files=no"); st != "" {
		t.Fatalf("%s has uncommitted changes:\n%s", repo, st)
	}
	if _, err := os.Stat(filepath.Join(repo, ".git", "BISECT_START")); err == nil {
		t.Fatalf("%s is in the middle of a git bisect: `git bisect reset` first", repo)
	}
	head := benchGit(t, repo, "rev-parse", "HEAD")
	t.Cleanup(func() { // a failed round leaves no bisection behind
		if _, err := os.Stat(filepath.Join(repo, ".git", "BISECT_START")); err == nil {
			_ = exec.Command("git", "-C", repo, "bisect", "reset").Run()
		}
	})
	firstBad := os.Getenv("KBISECT_BENCH_FIRST_BAD")
	if firstBad == "" {
		all := strings.Fields(benchGit(t, repo, "rev-list", bad, "^"+good))
		firstBad = all[len(all)/2]
	}
	firstBad = benchGit(t, repo, "rev-parse", "--verify", firstBad+"^{commit}")
	merges := benchGit(t, repo, "rev-list", "--count", "--merges", bad, "^"+good)
	commits := benchGit(t, repo, "rev-list", "--count", bad, "^"+good)
	_, graphErr := os.Stat(filepath.Join(repo, ".git", "objects", "info", "commit-graph"))
	t.Logf("%s: %s..%s, %s commits, %s merges, commit-graph: %v; first bad %.12s", repo, good, bad, commits, merges, graphErr == nil, firstBad)

	// Bad exactly when firstBad is an ancestor of HEAD; the first run
	// leaves a marker whose mtime says when the test first ran. A script
	// file, which both run the same way (git 2.39's bisect run takes one
	// argument as a program's name), of shell builtins besides one git.
	tmp := t.TempDir()
	marker, test := filepath.Join(tmp, "first-test"), filepath.Join(tmp, "test.sh")
	script := fmt.Sprintf("#!/bin/sh\n[ -e %[1]s ] || : > %[1]s\ngit merge-base --is-ancestor %[2]s HEAD\ncase $? in 0) exit 1;; 1) exit 0;; *) exit 255;; esac\n", marker, firstBad)
	if err := os.WriteFile(test, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	// The CPU time of the processes each side runs (checkouts and tests
	// included) says what the wall time says, less the load of others.
	type sample struct{ whole, first, cpu time.Duration }
	var gitRuns, kbRuns, oldRuns []sample
	childCPU := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	timed := func(run func() ([]string, string)) (sample, []string, string) {
		os.Remove(marker)
		cpu := childCPU()
		began := time.Now()
		tested, found := run()
		whole := time.Since(began)
		cpu = childCPU() - cpu
		fi, err := os.Stat(marker)
		if err != nil {
			t.Fatalf("the test command never ran: %v", err)
		}
		if now := benchGit(t, repo, "rev-parse", "HEAD"); now != head {
			t.Fatalf("HEAD is at %s after the bisection, not back at %s", now, head)
		}
		return sample{whole, fi.ModTime().Sub(began), cpu}, tested, found
	}
	gitBisect := func() ([]string, string) {
		benchGit(t, repo, "bisect", "start", bad, good)
		out := benchGit(t, repo, "bisect", "run", test)
		log := benchGit(t, repo, "bisect", "log")
		benchGit(t, repo, "bisect", "reset")
		m := regexp.MustCompile(`(?m)^([0-9a-f]{40}) is the first bad commit`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("git bisect run named no first bad commit:\n%s", out)
		}
		return regexp.MustCompile(`(?m)^git bisect (?:good|bad|skip) ([0-9a-f]{40})$`).FindAllString(log, -1), m[1]
	}
	kbisectWith := func(bin string) ([]string, string) {
		cmd := exec.Command(bin, "run", "--repo", repo, "--good", good, "--bad", bad, "--exec", test, "--json")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kbisect run: %v\n%s", err, out)
		}
		var res struct {
			FirstBad string `json:"first_bad"`
			Tested   []struct{ Commit, Verdict string }
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("kbisect --json: %v\n%s", err, out)
		}
		var tested []string
		for _, c := range res.Tested {
			tested = append(tested, "git bisect "+c.Verdict+" "+c.Commit)
		}
		return tested, res.FirstBad
	}
	// A fresh state each round: the run's state directory goes.
	clearState := func() {
		dirs, _ := filepath.Glob(filepath.Join(repo, ".git", "kbisect", "run-*"))
		for _, d := range dirs {
			if err := os.RemoveAll(d); err != nil {
				t.Fatal(err)
			}
		}
	}
	clearState()
	for round := 0; round <= rounds; round++ {
		load, _ := os.ReadFile("/proc/loadavg")
		order := []string{"git", "kbisect"}
		if old != "" {
			order = append(order, "kbisect-old")
		}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		var line []string
		steps := map[string][]string{}
		for _, who := range order {
			var s sample
			var tested []string
			var found string
			if who == "git" {
				s, tested, found = timed(gitBisect)
				if round > 0 {
					gitRuns = append(gitRuns, s)
				}
			} else {
				runs, b := &kbRuns, bin
				if who == "kbisect-old" {
					runs, b = &oldRuns, old
				}
				s, tested, found = timed(func() ([]string, string) { return kbisectWith(b) })
				clearState()
				if round > 0 {
					*runs = append(*runs, s)
				}
			}
			if found != firstBad {
				t.Fatalf("%s named %s the first bad commit, want %s", who, found, firstBad)
			}
			if round == 0 {
				t.Logf("warm-up %s: %d tests, %.2fs", who, len(tested), s.whole.Seconds())
			}
			line = append(line, fmt.Sprintf("%s %.2fs (first test %.2fs, cpu %.2fs, %d tests)", who, s.whole.Seconds(), s.first.Seconds(), s.cpu.Seconds(), len(tested)))
			steps[who] = tested
		}
		if !slices.Equal(steps["git"], steps["kbisect"]) || (old != "" && !slices.Equal(steps["git"], steps["kbisect-old"])) {
			t.Fatalf("git and kbisect tested other commits:\ngit:\n%s\nkbisect:\n%s", strings.Join(steps["git"], "\n"), strings.Join(steps["kbisect"], "\n"))
		}
		if round == 0 {
			continue
		}
		t.Logf("round %d (load %s): %s", round, strings.Join(strings.Fields(string(load))[:3], " "), strings.Join(line, ", "))
	}
	med := func(runs []sample, of func(sample) time.Duration) float64 {
		var v []float64
		for _, s := range runs {
			v = append(v, of(s).Seconds())
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	whole := func(s sample) time.Duration { return s.whole }
	first := func(s sample) time.Duration { return s.first }
	cpu := func(s sample) time.Duration { return s.cpu }
	g, k := med(gitRuns, whole), med(kbRuns, whole)
	t.Logf("median of %d alternating rounds: git bisect run %.2fs (first test %.2fs, cpu %.2fs), kbisect run --exec %.2fs (first test %.2fs, cpu %.2fs): kbisect/git %.2f× (cpu %.2f×)",
		rounds, g, med(gitRuns, first), med(gitRuns, cpu), k, med(kbRuns, first), med(kbRuns, cpu), k/g, med(kbRuns, cpu)/med(gitRuns, cpu))
	if old != "" {
		o := med(oldRuns, whole)
		t.Logf("the older kbisect (%s) alongside: %.2fs (first test %.2fs, cpu %.2fs): old/git %.2f× (cpu %.2f×)",
			old, o, med(oldRuns, first), med(oldRuns, cpu), o/g, med(oldRuns, cpu)/med(gitRuns, cpu))
	}
}

func benchGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("git %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return strings.TrimSpace(string(out))
}
