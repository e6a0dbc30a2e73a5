package bisect

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/internal/testrepo"
	"kbisect/verdict"
)

// oracleCase is one bisection of a generated history: the truth (which
// commit introduced the bug, which commits cannot be tested) and the range.
type oracleCase struct {
	name        string
	h           *testrepo.History
	hashes      []string
	dir         string
	culprit     int
	skips       map[int]bool
	bad         int
	goods       []int
	firstParent bool
	anc         []testrepo.Set
}

func (c *oracleCase) isBad(i int) bool { return c.anc[i].Has(c.culprit) }

// writeOracleRepo writes h with files that let a shell script judge each
// commit: "state" says good or bad, "skip" exists where the commit cannot be
// tested.
func writeOracleRepo(t testing.TB, h *testrepo.History, culprit int, skips map[int]bool) (string, []string, []testrepo.Set) {
	t.Helper()
	anc := h.Ancestors()
	dir := t.TempDir()
	hashes, err := h.Write(dir, func(i int) map[string]string {
		fs := map[string]string{"id": fmt.Sprintf("c%d", i), "state": "good"}
		if anc[i].Has(culprit) {
			fs["state"] = "bad"
		}
		if skips[i] {
			fs["skip"] = "yes"
		}
		return fs
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir, hashes, anc
}

// gitOutcome is what git bisect run did.
type gitOutcome struct {
	tested     []string
	kind       StepKind
	firstBad   string
	candidates []string
	output     string
	mergeBases int // merge bases the engine tested
}

var (
	reFirstBad  = regexp.MustCompile(`(?m)^([0-9a-f]{40}) is the first bad commit`)
	reCouldBe   = regexp.MustCompile(`(?s)The first bad commit could be any of:\n(.*?)We cannot bisect more!`)
	reMergeBase = regexp.MustCompile(`The merge base [0-9a-f]{40} is bad|Some good revs are not ancestors of the bad rev|was both good and bad`)
)

// runGitBisect runs the real `git bisect run` on the case and records the
// commits its script was asked about.
func runGitBisect(t testing.TB, c *oracleCase) gitOutcome {
	t.Helper()
	logFile := filepath.Join(t.TempDir(), "tested")
	args := []string{"bisect", "start"}
	if c.firstParent {
		args = append(args, "--first-parent")
	}
	args = append(args, c.hashes[c.bad])
	for _, g := range c.goods {
		args = append(args, c.hashes[g])
	}
	start := exec.Command("git", args...)
	start.Dir = c.dir
	startOut, startErr := start.CombinedOutput()
	script := fmt.Sprintf(`git rev-parse HEAD >> %s; test -f skip && exit 125; grep -q good state`, logFile)
	all := string(startOut)
	// git 2.39's bisect run stops with "bisect run success" when a second
	// merge base must be tested; running it again goes on from there.
	for range 10 {
		cmd := exec.Command("git", "bisect", "run", "sh", "-c", script)
		cmd.Dir = c.dir
		out, _ := cmd.CombinedOutput()
		all += string(out)
		if !strings.HasSuffix(strings.TrimSpace(string(out)), "bisect run success") || reFirstBad.Match(out) {
			break
		}
	}
	reset := exec.Command("git", "bisect", "reset")
	reset.Dir = c.dir
	_ = reset.Run()

	var g gitOutcome
	g.output = all
	if data, err := os.ReadFile(logFile); err == nil {
		g.tested = strings.Fields(string(data))
	}
	switch {
	case reFirstBad.MatchString(all):
		g.kind = StepFound
		g.firstBad = reFirstBad.FindStringSubmatch(all)[1]
	case reCouldBe.MatchString(all):
		g.kind = StepInconclusive
		g.candidates = strings.Fields(reCouldBe.FindStringSubmatch(all)[1])
	case reMergeBase.MatchString(all):
		g.kind = StepNotReproduced
	default:
		t.Fatalf("could not read git bisect's answer (start err %v):\n%s", startErr, all)
	}
	return g
}

// runEngine runs our session on the same case, judging commits by the
// truth directly.
func runEngine(t testing.TB, c *oracleCase) gitOutcome {
	t.Helper()
	g, err := OpenGraph(context.Background(), c.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	index := map[string]int{}
	for i, h := range c.hashes {
		index[h] = i
	}
	var goods []plumbing.Hash
	for _, gd := range c.goods {
		goods = append(goods, plumbing.NewHash(c.hashes[gd]))
	}
	s := NewSession(g, plumbing.NewHash(c.hashes[c.bad]), goods, c.firstParent)
	var out gitOutcome
	for step := 0; step < 200; step++ {
		st, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch st.Kind {
		case StepFound:
			out.kind, out.firstBad = StepFound, st.Commit.String()
			return out
		case StepInconclusive:
			out.kind = StepInconclusive
			for _, h := range st.Candidates {
				out.candidates = append(out.candidates, h.String())
			}
			return out
		case StepNotReproduced:
			out.kind = StepNotReproduced
			return out
		}
		if st.MergeBase {
			out.mergeBases++
		}
		sha := st.Commit.String()
		out.tested = append(out.tested, sha)
		i, ok := index[sha]
		if !ok {
			t.Fatalf("engine chose %s, which is not in the history", sha)
		}
		v := verdict.Good
		switch {
		case c.skips[i]:
			v = verdict.Skip
		case c.isBad(i):
			v = verdict.Bad
		}
		if err := s.Mark(st.Commit, v); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("engine did not finish in 200 steps")
	return out
}

// pickCase chooses a culprit and good revisions in h; with outside set, one
// good revision is not an ancestor of the bad one.
func pickCase(rng *rand.Rand, h *testrepo.History, nGoods int, outside bool) (culprit, bad int, goods []int) {
	anc := h.Ancestors()
	bad = h.Mainline
	out := -1
	if outside {
		var pool []int
		for i := range h.Commits {
			if !anc[bad].Has(i) {
				pool = append(pool, i)
			}
		}
		if len(pool) > 0 {
			out = pool[rng.Intn(len(pool))]
		}
	}
	var inRange []int
	for i := range h.Commits {
		if anc[bad].Has(i) && i > len(h.Commits)/5 && (out < 0 || !anc[out].Has(i)) {
			inRange = append(inRange, i)
		}
	}
	culprit = inRange[rng.Intn(len(inRange))]
	var goodPool []int
	for i := range h.Commits {
		if !anc[i].Has(culprit) && anc[bad].Has(i) {
			goodPool = append(goodPool, i)
		}
	}
	for len(goods) < nGoods && len(goodPool) > 0 {
		// Prefer older goods so ranges stay large.
		g := goodPool[rng.Intn(1+len(goodPool)/3)]
		if !slices.Contains(goods, g) {
			goods = append(goods, g)
		}
	}
	if out >= 0 {
		goods = append(goods, out)
	}
	if len(goods) == 0 {
		goods = []int{0}
	}
	return culprit, bad, goods
}

type oracleSpec struct {
	shape       testrepo.Shape
	goods       int
	outside     bool
	firstParent bool
	skipPercent int
}

func oracleSpecs() map[string]oracleSpec {
	merges := testrepo.Shape{Commits: 400, Subsystems: 3, TiePercent: 15}
	octopus := testrepo.Shape{Commits: 400, Subsystems: 2, Octopus: true, TiePercent: 10}
	criss := testrepo.Shape{Commits: 400, Subsystems: 3, CrissCross: true, TiePercent: 10}
	skewed := testrepo.Shape{Commits: 400, Subsystems: 3, Octopus: true, CrissCross: true, SkewPercent: 8, TiePercent: 20}
	return map[string]oracleSpec{
		"Subsystems":              {shape: merges, goods: 1},
		"SeveralGoods":            {shape: merges, goods: 3},
		"Octopus":                 {shape: octopus, goods: 1},
		"CrissCross":              {shape: criss, goods: 2},
		"SkewedDates":             {shape: skewed, goods: 2},
		"FirstParent":             {shape: merges, goods: 1, firstParent: true},
		"FirstParentSeveralGoods": {shape: skewed, goods: 3, firstParent: true},
		"GoodNotAncestor":         {shape: criss, goods: 0, outside: true},
		"GoodNotAncestorAndGood":  {shape: merges, goods: 1, outside: true},
		"GoodNotAncestorSkips":    {shape: skewed, goods: 0, outside: true, skipPercent: 20},
		"Skips":                   {shape: merges, goods: 1, skipPercent: 15},
		"SkipsHeavy":              {shape: skewed, goods: 2, skipPercent: 40},
		"SkipsFirstParent":        {shape: octopus, goods: 1, skipPercent: 25, firstParent: true},
	}
}

// TestEngineMatchesGitBisectRun checks, on generated merge-heavy histories,
// that the engine tests the same commits in the same order as the real
// `git bisect run`, and reaches the same answer.
func TestEngineMatchesGitBisectRun(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required for the bisection oracle tests")
	}
	seeds := 4
	if testing.Short() {
		seeds = 1
	}
	specs := oracleSpecs()
	names := make([]string, 0, len(specs))
	for n := range specs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		spec := specs[name]
		for seed := int64(1); seed <= int64(seeds); seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", name, seed), func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewSource(seed*7919 + int64(len(name))))
				h := testrepo.Generate(seed*104729+int64(len(name)), spec.shape)
				culprit, bad, goods := pickCase(rng, h, spec.goods, spec.outside)
				skips := map[int]bool{}
				for i := range h.Commits {
					if i != bad && !slices.Contains(goods, i) && rng.Intn(100) < spec.skipPercent {
						skips[i] = true
					}
				}
				dir, hashes, anc := writeOracleRepo(t, h, culprit, skips)
				c := &oracleCase{name: name, h: h, hashes: hashes, dir: dir, culprit: culprit, skips: skips,
					bad: bad, goods: goods, firstParent: spec.firstParent, anc: anc}
				want := runGitBisect(t, c)
				got := runEngine(t, c)
				if got.kind != want.kind {
					t.Fatalf("engine ended with %v, git with %v\ngit said:\n%s", got.kind, want.kind, want.output)
				}
				if !slices.Equal(got.tested, want.tested) {
					t.Fatalf("tested commits differ\n engine: %v\n    git: %v", short(got.tested), short(want.tested))
				}
				if got.firstBad != want.firstBad {
					t.Fatalf("first bad commit: engine %s, git %s", got.firstBad, want.firstBad)
				}
				gotC, wantC := slices.Sorted(slices.Values(got.candidates)), slices.Sorted(slices.Values(want.candidates))
				if !slices.Equal(gotC, wantC) {
					t.Fatalf("candidates: engine %v, git %v", short(gotC), short(wantC))
				}
				if want.kind == StepFound && !spec.firstParent && len(skips) == 0 && want.firstBad != hashes[culprit] {
					t.Fatalf("git found %s but the culprit is %s", want.firstBad, hashes[culprit])
				}
				if spec.outside && spec.goods == 0 && got.mergeBases == 0 && got.kind != StepNotReproduced {
					t.Fatalf("a good revision outside the bad one's history, but no merge base was tested (goods %v, kind %v)\n%s", goods, got.kind, want.output)
				}
				t.Logf("%d commits tested (%d merge bases, %d skippable commits), result %v", len(got.tested), got.mergeBases, len(skips), got.kind)
			})
		}
	}
}

func short(hs []string) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h[:8]
	}
	return out
}
