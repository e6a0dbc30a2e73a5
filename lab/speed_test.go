package lab

import (
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
)

// The wall time of a whole bisection, in simulated time: the real
// bisection engine on a real generated repository, the real verdict rule
// on samples drawn from the first seed report's noise, and a clock that
// only adds up what builds, boots and samples cost. Nothing sleeps.

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
	g, err := bisect.OpenGraph(r.dir)
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
func speedVerdict(v noise.Verdict) bisect.Verdict {
	switch v {
	case noise.Good:
		return bisect.Good
	case noise.Bad:
		return bisect.Bad
	}
	return bisect.Skip
}

// speedKtest is ktest.pl's bisect: every step builds (the first cold),
// installs, reboots through the firmware, takes 10 samples and calls the
// kernel bad when their mean passes the threshold. No calibration: ktest
// takes the endpoints on faith.
func speedKtest(tb testing.TB, r *speedRange, lab speedLab) speedResult {
	c := lab.costs
	s := bisect.NewSession(speedOpen(tb, r), r.bad, []plumbing.Hash{r.good}, false)
	var res speedResult
	extra := c.cold - c.incremental
	for {
		step, err := s.Next()
		if err != nil {
			tb.Fatal(err)
		}
		if step.Kind != bisect.StepTest {
			res.kind, res.culprit = step.Kind, step.Commit
			return res
		}
		res.wall += c.incremental + extra + c.reboot + 10*c.sample
		extra = 0
		res.builds++
		draw, sum := lab.noise.stream(r.seed, step.Commit, r.isBad[step.Commit]), 0.0
		for range 10 {
			sum += draw()
		}
		v := bisect.Good
		if sum/10 > lab.rule.Threshold {
			v = bisect.Bad
		}
		res.tested = append(res.tested, fmt.Sprintf("%.8s:%v:10", step.Commit, v))
		if err := s.Mark(step.Commit, v); err != nil {
			tb.Fatal(err)
		}
		res.steps++
	}
}

// speedSlot is a build slot: a worktree and an output directory of its
// own. Slot 0 is the pipeline's.
type speedSlot struct {
	// extra is what its next build costs beyond an incremental one: the
	// cold build's surplus until a build in it is done.
	extra      time.Duration
	commit     plumbing.Hash // the build running; zero when idle
	start, end time.Duration
}

// speedBuilds are the builds of one kbisect run as the pipeline and
// lab.Ahead make them. Slot 0 is the pipeline's own, where lab.Ahead
// builds too: one build at a time, and none started while held (from
// Plan or Wait until Go, when the pipeline builds). More slots are the
// hypothetical variants' extra build capacity, on CPUs of their own;
// nothing holds them.
type speedBuilds struct {
	costs    speedCosts
	slots    []*speedSlot
	maxSlots int // 0: as many as wanted
	held     bool
	queue    []plumbing.Hash
	built    map[plumbing.Hash]bool
	// builds started (cache hits not counted), of them cancelled.
	builds, cancels int
}

// newSpeedBuilds is a run's builds before its first: slot 0 is cold.
func newSpeedBuilds(c speedCosts, maxSlots int) *speedBuilds {
	return &speedBuilds{costs: c, maxSlots: maxSlots, built: map[plumbing.Hash]bool{},
		slots: []*speedSlot{{extra: c.cold - c.incremental}}}
}

func (b *speedBuilds) running(c plumbing.Hash) *speedSlot {
	for _, s := range b.slots {
		if s.commit == c {
			return s
		}
	}
	return nil
}

// start gives the queued builds, in order, to the idle slots that may
// build (the warmest first), opening new, cold slots as far as allowed.
// A queued commit already built is a cache hit: kbuild finds it from its
// inputs in no time worth counting.
func (b *speedBuilds) start(t time.Duration) {
	for len(b.queue) > 0 {
		c := b.queue[0]
		if b.built[c] {
			b.queue = b.queue[1:]
			continue
		}
		var idle *speedSlot
		for i, s := range b.slots {
			if s.commit.IsZero() && (i > 0 || !b.held) && (idle == nil || s.extra < idle.extra) {
				idle = s
			}
		}
		if idle == nil {
			if b.maxSlots > 0 && len(b.slots) >= b.maxSlots {
				return
			}
			idle = &speedSlot{extra: b.costs.cold - b.costs.incremental}
			b.slots = append(b.slots, idle)
		}
		b.queue = b.queue[1:]
		idle.commit, idle.start, idle.end = c, t, t+b.costs.incremental+idle.extra
		b.builds++
	}
}

// advance finishes, in order, the builds that end by t; each freed slot
// takes the next queued build unless held, as lab.Ahead's goroutine does.
func (b *speedBuilds) advance(t time.Duration) {
	for {
		var first *speedSlot
		for _, s := range b.slots {
			if !s.commit.IsZero() && s.end <= t && (first == nil || s.end < first.end) {
				first = s
			}
		}
		if first == nil {
			return
		}
		b.built[first.commit] = true
		first.commit, first.extra = plumbing.ZeroHash, 0
		b.start(first.end)
	}
}

// cancel stops s's build at t. What make compiled stays in the slot, but
// the commit is on the branch the verdict ruled out (in a bisection
// without skips it is never tested), and the slot's next build, of
// another commit, recompiles what differs from the slot's state whether
// or not this build got half-way: it costs an incremental build either
// way. So a cancelled build keeps no progress, but in a cold slot (only
// the hypothetical variants have more than slot 0): there the share of
// the cold surplus it got through stays done, the objects nearby commits
// share.
func (b *speedBuilds) cancel(s *speedSlot, t time.Duration) {
	done := float64(t-s.start) / float64(s.end-s.start)
	s.extra -= time.Duration(float64(s.extra) * done).Round(time.Second)
	s.commit = plumbing.ZeroHash
	b.cancels++
}

// plan is Ahead.Plan at t, just before the session's commit now is
// tested: slot 0 is held; a build of neither now nor a next commit (the
// other branch's) is cancelled, one of now goes on; the queue becomes the
// next commits, in next's order (after bad first), but now and those
// building. Extra slots start on the queue at once.
func (b *speedBuilds) plan(t time.Duration, now plumbing.Hash, next []plumbing.Hash) {
	b.advance(t)
	b.held = true
	for _, s := range b.slots {
		if !s.commit.IsZero() && s.commit != now && !slices.Contains(next, s.commit) {
			b.cancel(s, t)
		}
	}
	b.queue = b.queue[:0]
	for _, c := range next {
		if c != now && b.running(c) == nil && !slices.Contains(b.queue, c) {
			b.queue = append(b.queue, c)
		}
	}
	b.start(t)
}

// wait is Ahead.Wait at t, before the pipeline builds c: c leaves the
// queue, slot 0's build of another commit is cancelled (as lab.Ahead
// cancels any but c's: it has slot 0 only) and queued again first, and a
// running build of c is waited for. It returns when the pipeline's build
// can begin.
func (b *speedBuilds) wait(t time.Duration, c plumbing.Hash) time.Duration {
	b.advance(t)
	b.held = true
	if i := slices.Index(b.queue, c); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
	}
	if s := b.slots[0]; !s.commit.IsZero() && s.commit != c {
		b.queue = append([]plumbing.Hash{s.commit}, b.queue...)
		b.cancel(s, t)
	}
	if s := b.running(c); s != nil {
		t = s.end
		b.advance(t)
	}
	return t
}

// build is the pipeline's kbuild.Build in slot 0: the artifact cache's
// when built before.
func (b *speedBuilds) build(t time.Duration, c plumbing.Hash) time.Duration {
	if b.built[c] {
		return t
	}
	s := b.slots[0]
	t += b.costs.incremental + s.extra
	s.extra = 0
	b.built[c] = true
	b.builds++
	return t
}

// queueAhead is Ahead.Queue: commits join the queue.
func (b *speedBuilds) queueAhead(cs ...plumbing.Hash) {
	for _, c := range cs {
		if !c.IsZero() && b.running(c) == nil && !slices.Contains(b.queue, c) {
			b.queue = append(b.queue, c)
		}
	}
}

// goAhead is Ahead.Go at t, once the pipeline's build is done: slot 0 is
// free again and the queued builds start.
func (b *speedBuilds) goAhead(t time.Duration) {
	b.held = false
	b.start(t)
}

// speedNext is what comes next after each verdict on commit, depth
// verdicts down, bad before good (lab.Ahead's order), asked of forks of
// the session on a second graph as lab.Ahead asks.
func speedNext(tb testing.TB, s *bisect.Session, g2 *bisect.Graph, commit plumbing.Hash, depth int) []plumbing.Hash {
	type node struct {
		s *bisect.Session
		c plumbing.Hash
	}
	level := []node{{s, commit}}
	var out []plumbing.Hash
	for range depth {
		var next []node
		for _, n := range level {
			for _, v := range []bisect.Verdict{bisect.Bad, bisect.Good} {
				f := n.s.Fork(g2)
				if err := f.Mark(n.c, v); err != nil {
					tb.Fatal(err)
				}
				st, err := f.Next()
				if err != nil {
					tb.Fatal(err)
				}
				if st.Kind == bisect.StepTest {
					out = append(out, st.Commit)
					next = append(next, node{f, st.Commit})
				}
			}
		}
		level = next
	}
	return out
}

// speedAhead says how a kbisect run builds ahead.
type speedAhead struct {
	depth int // verdicts looked ahead; 0: no build-ahead (run --no-build-ahead)
	slots int // build slots, the pipeline's included; 0: as many as wanted
}

// speedKbisect is kbisect run --job on one host: calibration of both
// endpoints (Pipeline.Calibrate, the bad one first), then bisect.Drive
// with the pipeline as tester; every boot is a kexec followed by the
// job's settle, every verdict the rule's sequential sampling. With
// build-ahead, each step is what the job view's Testing and
// Pipeline.test call: Plan, Wait, the build, Go; then the host measures
// while the builds ahead run.
func speedKbisect(tb testing.TB, r *speedRange, lab speedLab, a speedAhead) (res speedResult) {
	c := lab.costs
	s := bisect.NewSession(speedOpen(tb, r), r.bad, []plumbing.Hash{r.good}, false)
	g2 := speedOpen(tb, r)
	b := newSpeedBuilds(c, a.slots)
	var t time.Duration
	measure := func(commit plumbing.Hash, rule noise.Rule) (noise.Decision, []float64) {
		d, xs := speedMeasure(tb, rule, lab.noise.stream(r.seed, commit, r.isBad[commit]))
		t += c.kexec + c.settle + time.Duration(len(xs))*c.sample
		res.floor += c.kexec + time.Duration(len(xs))*c.sample
		res.tested = append(res.tested, fmt.Sprintf("%.8s:%v:%d", commit, d.Verdict, len(xs)))
		return d, xs
	}
	defer func() {
		res.wall, res.builds, res.canceled = t, b.builds, b.cancels
		if a.depth > 0 {
			res.slots = len(b.slots)
		}
	}()
	rule := lab.rule
	if a.depth > 0 {
		// As run --job: the good endpoint builds ahead while the bad one
		// is measured, the first step's commit while the good one is.
		first, err := s.Fork(g2).Next()
		if err != nil {
			tb.Fatal(err)
		}
		b.queueAhead(r.good, first.Commit)
	}
	for _, end := range []struct {
		commit plumbing.Hash
		want   noise.Verdict
		values *[]float64
	}{{r.bad, noise.Bad, &rule.Bad}, {r.good, noise.Good, &rule.Good}} {
		if a.depth > 0 {
			t = b.wait(t, end.commit)
		}
		t = b.build(t, end.commit)
		if a.depth > 0 {
			b.goAhead(t)
		}
		d, xs := measure(end.commit, lab.rule)
		if d.Verdict != end.want {
			res.kind = bisect.StepNotReproduced
			return res
		}
		*end.values = xs
	}
	for {
		step, err := s.Next()
		if err != nil {
			tb.Fatal(err)
		}
		if step.Kind != bisect.StepTest {
			res.kind, res.culprit = step.Kind, step.Commit
			return res
		}
		if a.depth > 0 {
			b.plan(t, step.Commit, speedNext(tb, s, g2, step.Commit, a.depth))
			t = b.wait(t, step.Commit)
		}
		t = b.build(t, step.Commit)
		if a.depth > 0 {
			b.goAhead(t)
		}
		d, _ := measure(step.Commit, rule)
		if err := s.Mark(step.Commit, speedVerdict(d.Verdict)); err != nil {
			tb.Fatal(err)
		}
		res.steps++
	}
}

// speedThreeHosts tests three commits at once on three hosts, each with a
// build slot of its own: the session's next commit M and the commits that
// come next after M bad and after M good (forks of the session, as
// lab.Ahead asks). When M's verdict is in, the session is marked with it,
// asked what is next, and, when that is the commit predicted, marked with
// that commit's verdict too: two of git's steps per round, in git's order,
// each verdict from its own kernel's samples; the third kernel's samples
// are thrown away. Rounds are synchronous: one ends when M and the commit
// that follows it are measured. Calibration measures both endpoints at
// once on two hosts.
func speedThreeHosts(tb testing.TB, r *speedRange, lab speedLab) speedResult {
	c := lab.costs
	s := bisect.NewSession(speedOpen(tb, r), r.bad, []plumbing.Hash{r.good}, false)
	g2 := speedOpen(tb, r)
	var res speedResult
	extra := [3]time.Duration{}
	for i := range extra {
		extra[i] = c.cold - c.incremental
	}
	built := map[plumbing.Hash]bool{}
	// run builds commit on host h and measures it: how long it takes.
	run := func(h int, commit plumbing.Hash, rule noise.Rule) (noise.Decision, []float64, time.Duration) {
		var took time.Duration
		if !built[commit] {
			took = c.incremental + extra[h]
			extra[h], built[commit] = 0, true
			res.builds++
		}
		d, xs := speedMeasure(tb, rule, lab.noise.stream(r.seed, commit, r.isBad[commit]))
		return d, xs, took + c.kexec + c.settle + time.Duration(len(xs))*c.sample
	}
	note := func(commit plumbing.Hash, d noise.Decision, n int) {
		res.tested = append(res.tested, fmt.Sprintf("%.8s:%v:%d", commit, d.Verdict, n))
		res.floor += c.kexec + time.Duration(n)*c.sample
	}
	rule := lab.rule
	dBad, xsBad, tookBad := run(0, r.bad, rule)
	dGood, xsGood, tookGood := run(1, r.good, rule)
	note(r.bad, dBad, len(xsBad))
	note(r.good, dGood, len(xsGood))
	res.wall = max(tookBad, tookGood)
	if dBad.Verdict != noise.Bad || dGood.Verdict != noise.Good {
		res.kind = bisect.StepNotReproduced
		return res
	}
	rule.Bad, rule.Good = xsBad, xsGood
	var pending *bisect.Step
	for {
		var step bisect.Step
		if pending != nil {
			step, pending = *pending, nil
		} else {
			var err error
			if step, err = s.Next(); err != nil {
				tb.Fatal(err)
			}
		}
		if step.Kind != bisect.StepTest {
			res.kind, res.culprit = step.Kind, step.Commit
			return res
		}
		m := step.Commit
		after := map[bisect.Verdict]plumbing.Hash{}
		for _, v := range []bisect.Verdict{bisect.Bad, bisect.Good} {
			f := s.Fork(g2)
			if err := f.Mark(m, v); err != nil {
				tb.Fatal(err)
			}
			if n, err := f.Next(); err == nil && n.Kind == bisect.StepTest {
				after[v] = n.Commit
			}
		}
		// M on the warmest host, the other two on the others.
		hosts := []int{0, 1, 2}
		slices.SortStableFunc(hosts, func(x, y int) int { return int(extra[x] - extra[y]) })
		dM, xsM, tookM := run(hosts[0], m, rule)
		type measured struct {
			d    noise.Decision
			n    int
			took time.Duration
		}
		other := map[plumbing.Hash]measured{}
		for i, v := range []bisect.Verdict{bisect.Bad, bisect.Good} {
			if n := after[v]; !n.IsZero() {
				d, xs, took := run(hosts[1+i], n, rule)
				other[n] = measured{d, len(xs), took}
			}
		}
		note(m, dM, len(xsM))
		end := res.wall + tookM
		vM := speedVerdict(dM.Verdict)
		if err := s.Mark(m, vM); err != nil {
			tb.Fatal(err)
		}
		res.steps++
		next, err := s.Next()
		if err != nil {
			tb.Fatal(err)
		}
		follow, ok := other[after[vM]]
		if vM != bisect.Skip && ok && next.Kind == bisect.StepTest && next.Commit == after[vM] {
			note(next.Commit, follow.d, follow.n)
			end = max(end, res.wall+follow.took)
			if err := s.Mark(next.Commit, speedVerdict(follow.d.Verdict)); err != nil {
				tb.Fatal(err)
			}
			res.steps++
		} else {
			if next.Kind == bisect.StepTest {
				res.mispredicted++
			}
			pending = &next
		}
		res.wall = end
	}
}

// speedStrategies are the ways to the culprit compared, by name; kbisect
// marks the one-host kbisect runs, which differ in build scheduling only.
var speedStrategies = []struct {
	name, about string
	kbisect     bool
	run         func(tb testing.TB, r *speedRange, lab speedLab) speedResult
}{
	{"ktest", "(a) ktest-like: build, firmware reboot, 10 samples, mean", false, speedKtest},
	{"kbisect-no-ahead", "kbisect --no-build-ahead", true, func(tb testing.TB, r *speedRange, lab speedLab) speedResult {
		return speedKbisect(tb, r, lab, speedAhead{})
	}},
	{"kbisect", "(b) lab.Ahead: next after bad, then after good, in the pipeline's slot after its build", true, func(tb testing.TB, r *speedRange, lab speedLab) speedResult {
		return speedKbisect(tb, r, lab, speedAhead{depth: 1, slots: 1})
	}},
	{"hyp-2-slots", "(b2) hypothetical: a 2nd slot (cold at first) on CPUs of its own, both next at once", true, func(tb testing.TB, r *speedRange, lab speedLab) speedResult {
		return speedKbisect(tb, r, lab, speedAhead{depth: 1, slots: 2})
	}},
	{"hyp-depth-2", "(b3) hypothetical: 2 verdicts ahead, a slot with CPUs of its own per commit", true, func(tb testing.TB, r *speedRange, lab speedLab) speedResult {
		return speedKbisect(tb, r, lab, speedAhead{depth: 2})
	}},
	{"3-hosts", "3 hosts: next commit and both successors at once", false, speedThreeHosts},
}

// speedRunAll runs every strategy on a range.
func speedRunAll(tb testing.TB, r *speedRange, lab speedLab) map[string]speedResult {
	out := map[string]speedResult{}
	for _, s := range speedStrategies {
		res := s.run(tb, r, lab)
		res.missed = res.kind != bisect.StepFound || res.culprit != r.culprit
		out[s.name] = res
	}
	return out
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

// BenchmarkBisectWallTime reports the hours each strategy takes to the
// culprit, mean over seeds, on ranges of 500 and 5000 commits
// (go test ./lab -run '^$' -bench BisectWallTime -benchtime 1x -v).
func BenchmarkBisectWallTime(b *testing.B) {
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
			kb := hours("kbisect")
			b.Logf("goal (kbisect within 1.2x of the floor, at least 2x faster than ktest): %.2fx the floor, %.2fx faster than ktest: %s",
				kb/floor, hours("ktest")/kb, map[bool]string{true: "met", false: "not met"}[kb <= 1.2*floor && hours("ktest") >= 2*kb])
		})
	}
}
