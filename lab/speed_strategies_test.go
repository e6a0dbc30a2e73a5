package lab

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/noise"
	"kbisect/verdict"
)

// speedKtest is a ktest-like baseline of this benchmark's own: every
// step builds (the first cold), installs, reboots through the firmware,
// takes 10 samples and calls the kernel bad when their mean passes the
// threshold. No calibration: ktest takes the endpoints on faith.
// ktest.pl itself runs its TEST once a step; simulate's
// BenchmarkBisectWallTime times that, and what ktest needs to be as often
// right as kbisect.
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
		v := verdict.Good
		if sum/10 > lab.rule.Threshold {
			v = verdict.Bad
		}
		res.tested = append(res.tested, fmt.Sprintf("%.8s:%v:10", step.Commit, v))
		if err := s.Mark(step.Commit, v); err != nil {
			tb.Fatal(err)
		}
		res.steps++
	}
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
		want   verdict.Verdict
		values *[]float64
	}{{r.bad, verdict.Bad, &rule.Bad}, {r.good, verdict.Good, &rule.Good}} {
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
	if dBad.Verdict != verdict.Bad || dGood.Verdict != verdict.Good {
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
		after := map[verdict.Verdict]plumbing.Hash{}
		for _, v := range []verdict.Verdict{verdict.Bad, verdict.Good} {
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
		for i, v := range []verdict.Verdict{verdict.Bad, verdict.Good} {
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
		if vM != verdict.Skip && ok && next.Kind == bisect.StepTest && next.Commit == after[vM] {
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
