package lab

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/internal/testrepo"
	"kbisect/noise"
	"kbisect/verdict"
)

// The wall time of a whole bisection with `verdict.search: rule`, in
// simulated time: git's bisection on a real generated repository, the
// real verdict rule on samples drawn from the first seed report's noise,
// and a clock that only adds up what builds, boots and samples cost. It
// models what only the rule path does: lab.Ahead's build-ahead and
// several hosts. Nothing sleeps. The default engine, the posterior
// search, is timed to an answer with its confirmation, against its
// physical floor and ktest.pl at equal confidence, by simulate's
// BenchmarkBisectWallTime (just bench-speed).

// speedCosts are the lab's times: the issue's, and the job's own (the
// settle after a boot, one sample) from its job file.
type speedCosts struct {
	cold, incremental time.Duration // a build in a fresh slot; in a slot that built a nearby commit
	reboot            time.Duration // a firmware reboot (ktest)
	kexec             time.Duration
	settle            time.Duration // boot.settle, after every boot kbisect makes
	sample            time.Duration // workload.duration
}

// speedLab is what every simulated run shares: the costs, the job's rule
// before calibration, the noise.
type speedLab struct {
	costs speedCosts
	rule  noise.Rule
	noise speedNoise
}

// speedLoadLab reads testdata/speed/job.yaml: what a job gets by default
// is what the simulation uses.
func speedLoadLab(tb testing.TB) speedLab {
	tb.Helper()
	job, err := configs.Load(filepath.Join("testdata", "speed", "job.yaml"),
		configs.LoadOptions{Home: tb.TempDir(), LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		tb.Fatal(err)
	}
	rule, err := Rule(job, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return speedLab{
		costs: speedCosts{cold: 25 * time.Minute, incremental: 6 * time.Minute, reboot: 4 * time.Minute,
			kexec: 40 * time.Second, settle: job.Boot.Settle.D(), sample: job.Workload.Duration.D()},
		rule:  rule,
		noise: speedSeedNoise,
	}
}

// speedNoise is one value per sample, in ns: the worst isolated CPU's max
// single noise. Lognormal (noise is multiplicative); a share of samples
// is a spike 20 times larger (an SMI, the tick on the first nohz_full CPU
// the report mentions), on good and bad kernels alike.
type speedNoise struct {
	goodMedian, goodSigma float64
	badMedian, badSigma   float64
	spikes                float64
}

// speedSeedNoise is the first seed report: good kernels a few µs (the
// report's are quieter still, 0-10 ns; below a hundredth of the threshold
// the rule treats them alike), bad ones around 50 µs and tight (the worst
// of 32 CPUs, each at 44-52 µs), one sample in 20 a spike.
var speedSeedNoise = speedNoise{goodMedian: 3e3, goodSigma: 0.3, badMedian: 50e3, badSigma: 0.08, spikes: 0.05}

// stream gives the samples of one commit's kernel. They depend on the
// seed and the commit only, so every strategy sees the same samples of a
// commit: the strategies differ in time, not in luck.
func (n speedNoise) stream(seed uint64, commit plumbing.Hash, bad bool) func() float64 {
	rng := rand.New(rand.NewPCG(seed, binary.LittleEndian.Uint64(commit[:8])))
	med, sigma := n.goodMedian, n.goodSigma
	if bad {
		med, sigma = n.badMedian, n.badSigma
	}
	return func() float64 {
		x := med * math.Exp(sigma*rng.NormFloat64())
		if rng.Float64() < n.spikes {
			x *= 20
		}
		return x
	}
}

// speedRange is a generated kernel-like history with one culprit planted
// between its endpoints.
type speedRange struct {
	dir                string
	good, bad, culprit plumbing.Hash
	size               int // commits between the endpoints (git rev-list --count bad ^good)
	onMainline         bool
	isBad              map[plumbing.Hash]bool
	seed               uint64
	commits            int
}

// speedNewRange writes a history with subsystem trees, topic branches,
// octopus and criss-cross merges and skewed dates. The bad endpoint is the
// mainline's tip, the good one the first-parent ancestor whose range is
// closest to size commits; the culprit an ordinary (non-merge) commit of
// the middle 60 % of the range, and bad are its descendants.
func speedNewRange(tb testing.TB, seed int64, size int) *speedRange {
	tb.Helper()
	h := testrepo.Generate(seed, testrepo.Shape{Commits: size + size/3 + 100, Subsystems: 6, Octopus: true, CrissCross: true, TiePercent: 3, SkewPercent: 2})
	dir := tb.TempDir()
	hashes, err := h.Write(dir, nil)
	if err != nil {
		tb.Fatal(err)
	}
	// One tag per commit: packed, or every OpenGraph reads them all; and
	// a commit-graph, as a kernel clone has.
	for _, args := range [][]string{{"pack-refs", "--all"}, {"commit-graph", "write", "--reachable"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			tb.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	anc := h.Ancestors()
	count := func(s testrepo.Set) int {
		n := 0
		for _, w := range s {
			n += bits.OnesCount64(w)
		}
		return n
	}
	bad := h.Mainline
	good, best := -1, math.MaxInt
	onFP := map[int]bool{}
	for c := bad; ; c = h.Commits[c].Parents[0] {
		onFP[c] = true
		if d := speedAbs(count(anc[bad]) - count(anc[c]) - size); c != bad && d < best {
			good, best = c, d
		}
		if len(h.Commits[c].Parents) == 0 {
			break
		}
	}
	var ordinary []int
	for c := range h.Commits {
		if anc[bad].Has(c) && !anc[good].Has(c) && len(h.Commits[c].Parents) == 1 {
			ordinary = append(ordinary, c)
		}
	}
	middle := ordinary[len(ordinary)/5 : len(ordinary)-len(ordinary)/5]
	culprit := middle[rand.New(rand.NewPCG(uint64(seed), 0x6b62697365637421)).IntN(len(middle))]
	r := &speedRange{dir: dir, good: plumbing.NewHash(hashes[good]), bad: plumbing.NewHash(hashes[bad]),
		culprit: plumbing.NewHash(hashes[culprit]), size: count(anc[bad]) - count(anc[good]), onMainline: onFP[culprit],
		isBad: map[plumbing.Hash]bool{}, seed: uint64(seed), commits: len(h.Commits)}
	for c := range h.Commits {
		if anc[c].Has(culprit) {
			r.isBad[plumbing.NewHash(hashes[c])] = true
		}
	}
	return r
}

func speedAbs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func speedOpen(tb testing.TB, r *speedRange) *bisect.Graph {
	tb.Helper()
	g, err := bisect.OpenGraph(context.Background(), r.dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	return g
}

// speedResult is one simulated bisection.
type speedResult struct {
	wall    time.Duration
	kind    bisect.StepKind
	culprit plumbing.Hash
	steps   int // verdicts of the bisection, calibration's not counted
	// floor is kexec plus the samples of every verdict (calibration's
	// included): the time a lab that never waited for a build would take.
	floor time.Duration
	// tested lists commit:verdict:samples in the order measured.
	tested []string
	// builds started, of them cancelled; build slots used (build-ahead
	// runs only); commits a fork predicted that the session did not ask
	// for next.
	builds, canceled, slots, mispredicted int
	// missed: the bisection did not name the planted culprit.
	missed bool
}

// speedMeasure samples a kernel until the rule decides, as Pipeline.measure
// does with one boot.
func speedMeasure(tb testing.TB, rule noise.Rule, draw func() float64) (noise.Decision, []float64) {
	var xs []float64
	for {
		xs = append(xs, draw())
		d, err := rule.Decide(xs)
		if err != nil {
			tb.Fatal(err)
		}
		if !d.More {
			return d, xs
		}
	}
}

// speedVerdict is the verdict the pipeline hands the session.
func speedVerdict(v verdict.Verdict) verdict.Verdict {
	switch v {
	case verdict.Good:
		return verdict.Good
	case verdict.Bad:
		return verdict.Bad
	}
	return verdict.Skip
}

// TestSpeedBuildsAheadAsLabAheadDoes walks the build model through
// lab.Ahead's policy: nothing starts at Plan, the successors build one
// after the other from Go, the other branch's build is cancelled at the
// next Plan, and the commit about to be tested is waited for, then found
// in the cache.
func TestSpeedBuildsAheadAsLabAheadDoes(t *testing.T) {
	b := newSpeedBuilds(speedCosts{cold: 25 * time.Minute, incremental: 6 * time.Minute}, 1)
	h := func(s string) plumbing.Hash { return plumbing.NewHash(strings.Repeat(s, 40)) }
	mn := func(m int) time.Duration { return time.Duration(m) * time.Minute }
	// The endpoint E; the step M, after which come X when M is bad, Y
	// when good; after Y, P when bad, Q when good.
	e, m, x, y, p, q := h("e"), h("1"), h("2"), h("3"), h("4"), h("5")
	if got := b.build(0, e); got != mn(25) {
		t.Fatalf("the first build ends at %v, want the cold build's %v", got, mn(25))
	}
	b.plan(mn(25), m, []plumbing.Hash{x, y})
	if !b.slots[0].commit.IsZero() || !slices.Equal(b.queue, []plumbing.Hash{x, y}) {
		t.Fatalf("after Plan: building %v, queue %v; want nothing, then X, Y", b.slots[0].commit, b.queue)
	}
	end := b.build(b.wait(mn(25), m), m)
	b.goAhead(end)
	if end != mn(31) || b.slots[0].commit != x || b.slots[0].end != mn(37) {
		t.Fatalf("M built by %v, then building %v until %v; want 31m, X until 37m", end, b.slots[0].commit, b.slots[0].end)
	}
	// M good at 35m: X is cancelled, Y built in the pipeline's turn, by 41m.
	b.plan(mn(35), y, []plumbing.Hash{p, q})
	if b.cancels != 1 || !b.slots[0].commit.IsZero() {
		t.Fatalf("X not cancelled at Plan: %d cancels, building %v", b.cancels, b.slots[0].commit)
	}
	end = b.build(b.wait(mn(35), y), y)
	b.goAhead(end)
	// Y good at 50m: P was built by 47m, Q runs until 53m and is waited
	// for; the pipeline then finds it in the cache.
	b.plan(mn(50), q, []plumbing.Hash{h("6"), h("7")})
	if got := b.wait(mn(50), q); got != mn(53) || b.build(got, q) != mn(53) {
		t.Fatalf("Q ready at %v, want 53m and a cache hit", got)
	}
	if b.builds != 6 || b.cancels != 1 || len(b.slots) != 1 {
		t.Errorf("%d builds, %d cancelled, %d slots; want 6, 1, 1", b.builds, b.cancels, len(b.slots))
	}
}

// TestSpeedModelFloorIsBelowEveryStrategyAndEachFindsTheCulprit checks the
// simulation's invariants on the benchmark's 500-commit ranges, each one
// that holds whatever the seed: the job's defaults are the rule the issue
// names, the same seed gives the same runs, the kbisect runs measure the
// same kernels with the same samples (one host or three: they differ in
// scheduling only) and so name the same commit, the planted culprit; the
// time without build-ahead and ktest's add up to their parts; the floor
// is below every one-host strategy, three hosts measure at most two
// verdicts at once so stay above half of it; no one-host kbisect run
// beats the floor plus its cold build and settles, and build-ahead in
// the pipeline's slot never makes a step wait longer than building the
// commit would. Whether ktest names the culprit is not checked: its mean
// of 10 is fooled by a good kernel's spikes on some seeds (4 of these).
func TestSpeedModelFloorIsBelowEveryStrategyAndEachFindsTheCulprit(t *testing.T) {
	lab := speedLoadLab(t)
	r0 := lab.rule
	if r0.Kind != noise.Absolute || r0.Threshold != 20e3 || r0.MinSamples != 3 || r0.MaxSamples != 10 || r0.Confidence != 0.95 ||
		lab.costs.settle != 30*time.Second || lab.costs.sample != time.Minute {
		t.Fatalf("the job's defaults changed: rule %+v, settle %v, sample %v", r0, lab.costs.settle, lab.costs.sample)
	}
	c := lab.costs
	for seed := int64(1); seed <= 5; seed++ {
		r := speedNewRange(t, seed, 500)
		if r.size < 450 || r.size > 550 {
			t.Errorf("seed %d: a range of %d commits, want about 500", seed, r.size)
		}
		runs := speedRunAll(t, r, lab)
		if again := speedRunAll(t, r, lab); !reflect.DeepEqual(runs, again) {
			t.Errorf("seed %d: two runs differ:\n%v\n%v", seed, runs, again)
		}
		base := runs["kbisect-no-ahead"]
		for _, s := range speedStrategies {
			res := runs[s.name]
			if s.name == "ktest" {
				continue
			}
			if res.kind != bisect.StepFound || res.culprit != r.culprit {
				t.Errorf("seed %d, %s: ended %v at %s, the culprit is %s (tested %v)", seed, s.name, res.kind, res.culprit, r.culprit, res.tested)
			}
			if !slices.Equal(res.tested, base.tested) || res.floor != base.floor {
				t.Errorf("seed %d, %s measured %v, without build-ahead %v", seed, s.name, res.tested, base.tested)
			}
			if !s.kbisect {
				continue
			}
			// The bad endpoint's cold build comes before any sample.
			if reach := base.floor + c.cold + time.Duration(base.steps+2)*c.settle; res.wall < reach {
				t.Errorf("seed %d, %s: %v, below the floor plus a cold build and the settles %v", seed, s.name, res.wall, reach)
			}
		}
		for _, s := range speedStrategies {
			if res := runs[s.name]; s.name != "3-hosts" && res.wall <= base.floor {
				t.Errorf("seed %d, %s: %v, not above the floor %v", seed, s.name, res.wall, base.floor)
			}
		}
		if h3 := runs["3-hosts"]; h3.wall <= base.floor/2 {
			t.Errorf("seed %d: three hosts %v, not above half the floor %v", seed, h3.wall, base.floor)
		}
		// Without build-ahead: a cold build, then one incremental build
		// per kernel; every boot settles.
		n := time.Duration(base.steps)
		if want := base.floor + c.cold + (n+1)*c.incremental + (n+2)*c.settle; base.wall != want || base.builds != base.steps+2 {
			t.Errorf("seed %d: without build-ahead %v in %d builds, want %v in %d", seed, base.wall, base.builds, want, base.steps+2)
		}
		// With it, in the pipeline's one slot: a step waits for the rest of
		// its commit's build ahead, or for its own incremental build, never
		// longer.
		if kb := runs["kbisect"]; kb.wall > base.wall || kb.slots != 1 {
			t.Errorf("seed %d: build-ahead %v in %d slots, without it %v", seed, kb.wall, kb.slots, base.wall)
		}
		kt := runs["ktest"]
		k := time.Duration(kt.steps)
		if want := c.cold + (k-1)*c.incremental + k*(c.reboot+10*c.sample); kt.wall != want {
			t.Errorf("seed %d: ktest %v, want %v", seed, kt.wall, want)
		}
		t.Logf("seed %d, %d commits (%d between the endpoints), culprit %.8s (mainline %v):", seed, r.commits, r.size, r.culprit, r.onMainline)
		for _, line := range speedTable([]map[string]speedResult{runs}, c) {
			t.Log(line)
		}
	}
}

// speedMissed counts the runs of a strategy that did not name the culprit.
func speedMissed(runs []map[string]speedResult, name string) int {
	n := 0
	for _, r := range runs {
		if r[name].missed {
			n++
		}
	}
	return n
}

// speedTable is the runs' means over seeds, one line per strategy.
func speedTable(runs []map[string]speedResult, c speedCosts) []string {
	mean := func(f func(map[string]speedResult) float64) float64 {
		sum := 0.0
		for _, r := range runs {
			sum += f(r)
		}
		return sum / float64(len(runs))
	}
	floor := mean(func(r map[string]speedResult) float64 { return r["kbisect-no-ahead"].floor.Hours() })
	ktest := mean(func(r map[string]speedResult) float64 { return r["ktest"].wall.Hours() })
	lines := []string{fmt.Sprintf("  %-17s %7s %7s %7s %7s %7s  %s", "strategy", "hours", "/floor", "ktest/", "steps", "builds", "")}
	lines = append(lines, fmt.Sprintf("  %-17s %7.2f %7.2f %7.2f %7.1f %7s  kexec + samples of every verdict, calibration's included",
		"floor", floor, 1.0, ktest/floor, mean(func(r map[string]speedResult) float64 { return float64(r["kbisect-no-ahead"].steps) }), "-"))
	reach := mean(func(r map[string]speedResult) float64 {
		n := r["kbisect-no-ahead"]
		return (n.floor + c.cold + time.Duration(n.steps+2)*c.settle).Hours()
	})
	lines = append(lines, fmt.Sprintf("  %-17s %7.2f %7.2f %7.2f %7s %7s  the floor plus a cold build and a settle per boot: no one-host kbisect run is faster",
		"floor+cold+settle", reach, reach/floor, ktest/reach, "", "1"))
	for _, s := range speedStrategies {
		h := mean(func(r map[string]speedResult) float64 { return r[s.name].wall.Hours() })
		extra := ""
		if m := speedMissed(runs, s.name); m > 0 {
			extra = fmt.Sprintf(", wrong culprit in %d of %d", m, len(runs))
		}
		if sl := mean(func(r map[string]speedResult) float64 { return float64(r[s.name].slots) }); sl > 0 {
			extra += fmt.Sprintf(", %.1f slots, %.1f builds cancelled", sl, mean(func(r map[string]speedResult) float64 { return float64(r[s.name].canceled) }))
		}
		if mp := mean(func(r map[string]speedResult) float64 { return float64(r[s.name].mispredicted) }); mp > 0 {
			extra += fmt.Sprintf(", %.1f mispredicted", mp)
		}
		lines = append(lines, fmt.Sprintf("  %-17s %7.2f %7.2f %7.2f %7.1f %7.1f  %s%s",
			s.name, h, h/floor, ktest/h,
			mean(func(r map[string]speedResult) float64 { return float64(r[s.name].steps) }),
			mean(func(r map[string]speedResult) float64 { return float64(r[s.name].builds) }), s.about, extra))
	}
	return lines
}

// BenchmarkRuleBuildAheadWallTime reports the hours each way of
// scheduling the rule path's builds takes to git's culprit (calibration,
// no confirmation), mean over seeds, on ranges of 500 and 5000 commits
// (go test ./lab -run '^$' -bench RuleBuildAheadWallTime -benchtime 1x -v).
// Its floor is the rule's own boots without builds.
func BenchmarkRuleBuildAheadWallTime(b *testing.B) {
	lab := speedLoadLab(b)
	for _, size := range []int{500, 5000} {
		var ranges []*speedRange
		for seed := int64(1); seed <= 5; seed++ {
			ranges = append(ranges, speedNewRange(b, seed, size))
		}
		b.Run(fmt.Sprintf("commits=%d", size), func(b *testing.B) {
			var runs []map[string]speedResult
			for range b.N {
				runs = runs[:0]
				for _, r := range ranges {
					runs = append(runs, speedRunAll(b, r, lab))
				}
			}
			mean := func(name string, f func(speedResult) float64) float64 {
				sum := 0.0
				for _, r := range runs {
					sum += f(r[name])
				}
				return sum / float64(len(runs))
			}
			hours := func(name string) float64 { return mean(name, func(r speedResult) float64 { return r.wall.Hours() }) }
			floor := mean("kbisect-no-ahead", func(r speedResult) float64 { return r.floor.Hours() })
			b.ReportMetric(floor, "floor-h")
			for _, s := range speedStrategies {
				b.ReportMetric(hours(s.name), s.name+"-h")
				b.ReportMetric(float64(speedMissed(runs, s.name)), s.name+"-missed")
			}
			b.ReportMetric(hours("kbisect")/floor, "kbisect/floor")
			b.ReportMetric(hours("ktest")/hours("kbisect"), "ktest/kbisect")
			sizes := 0
			for _, r := range ranges {
				sizes += r.size
			}
			b.Logf("%d commits between the endpoints (mean of %d seeds):", sizes/len(ranges), len(ranges))
			for _, line := range speedTable(runs, lab.costs) {
				b.Log(line)
			}
		})
	}
}
