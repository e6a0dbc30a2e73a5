package culprit

import (
	"fmt"
	"math"
)

// A range may hold two steps: a regression and a later commit that adds
// to it, or partly fixes it. The two-sided model then puts the commits
// between the steps on whichever side they sit nearer, and the search
// names the step that crossed the middle — the later one, when the first
// step was the smaller. What a confirmation's boots say of that: a parent
// of the candidate that measures clearly worse than the good endpoint
// (an earlier step: the candidate is not the first commit that made it
// worse), or a candidate that measures clearly unlike the bad endpoint (a
// later step, to list beside the answer).

// minStepSpan is the least distance (log) between the good and the bad
// level at which steps are told, a regression of 28 %: nearer (near the
// noise floor, or a regression in how often it spikes) a step's share of
// it is lost in the boots' scatter. Not in spreads within a boot: a model
// learned across two steps has its spread widened by them.
const minStepSpan = 0.25

// stepShare is the least part of the way from the good level to the bad
// one a kernel must sit from its side's endpoint to be a step of its own:
// below it, what the levels' drift and scatter leave is no step.
const stepShare = 0.2

// halfShare is half a step's share of the way span: a parent that far
// up or more is not shown level with the good endpoint by few boots, and
// one beyond doubt that far up is no good kernel.
func halfShare(span float64) float64 { return stepShare * span / 2 }

// stepT is the least distance, in standard errors, between two kernels'
// boot levels that shows a step; stepMaybe the least that suggests one
// (fresh boots more then tell); stepDoubt the least that, once the rounds
// of fresh boots are spent, is doubt enough not to name the candidate (or
// lists a later step as "perhaps"). With the few boots of a confirmation, t
// has heavy tails: stepShare keeps chance steps off ordinary runs
// (measured in docs/bisection.md, "Two steps in one range").
const (
	stepT     = 4.5
	stepMaybe = 1
	stepDoubt = 3
)

// stepClear is how many standard errors short of a step's share a
// parent's distance from the good endpoint must fall to rule an earlier
// step out, where the boots' own scatter lets a share be told (stepFrom's
// sharp). One was not enough: a first step a quarter of the way (7 → 8.5
// → 15 µs) had its parent's four boots of three samples fall that short
// in 15.5 % of the runs, which named the later step at 0.99 or more.
const stepClear = 2

// stepKnown is the fewest boots of a parent and the good endpoint,
// together, whose levels' scatter earlierStep trusts for the boots' own
// spread when it rules a parent out for sitting under a standard error
// from the good endpoint. From fewer (under ten degrees of freedom) that
// spread is a guess, and a parent half a share up or more is booted
// again: a first step to 8.5 µs whose parent's four boots scattered. From
// as many, it is ruled out as before: a good parent in the noisy row (5 %
// of a good kernel's boots measure bad), 0.11 up at 0.73 standard errors
// on 17 boots, booted again, had five of its twenty boots on the wrong
// side, and its run ended inconclusive (3.1 standard errors after ten
// rounds).
const stepKnown = 12

// stepLeast is the least samples of a confirmation's boot of a parent
// or of the good endpoint (stepSamples): a boot of the search's three
// samples at a spread of 0.2 puts its level ±12 % off, about a step's
// share of 7 → 15 µs (15 %), and a few such boots cannot rule a step
// out. Eight halve that; a sample costs less than a boot.
const stepLeast = 8

// level is a boot's level: the mean of its samples' logs within three
// spreads of their median (a spike is not the level), less the machine's
// drift at the boot; and the squared distances of those samples from it,
// with how many there were.
func (b *weighed) level(spread float64) (level, ss float64, n int) {
	m := median(b.r.ys)
	sum := 0.0
	for _, y := range b.r.ys {
		if math.Abs(y-m) <= 3*spread {
			sum += y
			n++
		}
	}
	if n == 0 {
		return m - b.drift, 0, 0 // the two middle samples far apart: their mean
	}
	mean := sum / float64(n)
	for _, y := range b.r.ys {
		if math.Abs(y-m) <= 3*spread {
			ss += (y - mean) * (y - mean)
		}
	}
	return mean - b.drift, ss, n
}

// levels are the boot levels of a kernel, in order.
func (s *Search) levels(k kernel) []float64 {
	var out []float64
	for _, l := range s.levelsOf(k) {
		out = append(out, l.at)
	}
	return out
}

// bootLevel is one boot's level, and what its samples say of it: their
// squared distances from it and how many there were.
type bootLevel struct {
	at, ss float64
	n      int
}

// levelsOf are the boot levels of a kernel, in order.
func (s *Search) levelsOf(k kernel) []bootLevel {
	var out []bootLevel
	for _, b := range s.w.boots {
		if b.kernel == k && !b.r.empty() {
			l, ss, n := b.level(s.m.Spread)
			out = append(out, bootLevel{at: l, ss: ss, n: n})
		}
	}
	return out
}

// stepFrom compares a kernel's boots with an endpoint's: how far (log)
// its level sits from the endpoint's, how many standard errors that is,
// and how many standard errors the distance falls short of a step's
// share of the way from good to bad (0 or less: it is a step's share) —
// t 0 when either has fewer than two boots or the regression is too
// small for steps to be told.
//
// Each kernel's level is its boots' mean weighed by what each tells: a
// boot's level scatters by what its samples leave (their spread within
// a boot, pooled over both kernels' boots, over its samples) and by the
// boots' own spread, learned from how far the two kernels' levels
// scatter beyond that — not the model's: a model learned across two
// steps has its spreads widened by them. A confirmation's boot of a
// parent takes more samples than the search's (stepSamples) and counts
// for more. sharp says the boots' own spread is at most half a step's
// share: beyond it (a machine whose boots wander, AR(1) at a spread of
// 0.2) no number of a confirmation's boots tells a share, and an earlier
// step is told only when it shows.
func (s *Search) stepFrom(k, endpoint kernel) (d, t, short float64, sharp bool) {
	a, e := s.levelsOf(k), s.levelsOf(endpoint)
	within, df := 0.0, 0
	for _, ls := range [][]bootLevel{a, e} {
		for _, l := range ls {
			within += l.ss
			df += max(l.n-1, 0)
		}
	}
	if df == 0 {
		return 0, 0, 0, false
	}
	within /= float64(df)
	a, e = strayless(a, within), strayless(e, within)
	if len(a) < 2 || len(e) < 2 {
		return 0, 0, 0, false
	}
	// The boots' own spread: what the levels scatter beyond their samples.
	ss, inv := 0.0, 0.0
	for _, ls := range [][]bootLevel{a, e} {
		m := 0.0
		for _, l := range ls {
			m += l.at
		}
		m /= float64(len(ls))
		for _, l := range ls {
			ss += (l.at - m) * (l.at - m)
			inv += 1 / float64(max(l.n, 1))
		}
	}
	n := len(a) + len(e)
	tau := math.Max(0, ss/float64(n-2)-within*inv/float64(n))
	weighed := func(ls []bootLevel) (mean, v float64) {
		sw := 0.0
		for _, l := range ls {
			w := 1 / (within/float64(max(l.n, 1)) + tau + 1e-9)
			mean += w * l.at
			sw += w
		}
		return mean / sw, 1 / sw
	}
	ma, va := weighed(a)
	me, ve := weighed(e)
	d = ma - me
	span := math.Abs(s.m.Bad - s.m.Good)
	if span < minStepSpan {
		return d, 0, 0, false
	}
	se := math.Sqrt(va + ve)
	return d, math.Abs(d) / se, (stepShare*span - math.Abs(d)) / se, tau <= sq(halfShare(span))
}

// earlierStep says, when a parent of candidate c may measure worse than
// the good endpoint by a step's share of the way, that c may not be the
// first commit that made it worse ("" when no parent does), which parent,
// and how many standard errors apart the two are: stepT shows it beyond
// doubt, stepMaybe only suggests it (fresh boots more of the parent and
// the good endpoint will tell), stepDoubt after those is doubt enough not
// to name c. Where the boots' own scatter lets a step's share be told
// (sharp), a parent is ruled out only once its distance falls short of a
// share by stepClear standard errors: until then it asks for fresh boots
// (and, once they are spent, stepUntold may end the run). Where it does
// not, a parent whose distance is short of a share by less than one
// standard error asks for them, as the learned levels a step between them
// pulled towards each other, or its few boots fell low — unless it is
// also under a standard error from the good endpoint, and, while the two
// have fewer than stepKnown boots, under half a share from it: half a
// share up, a parent under a standard error away on so few boots is one
// whose boots scatter, not one shown level with the good endpoint (those
// of a first step to 8.5 µs, booted four times, were so in 3 runs of 100
// and named the later step).
func (s *Search) earlierStep(c int) (string, int, float64) {
	toBad, span := math.Copysign(1, s.m.Bad-s.m.Good), math.Abs(s.m.Bad-s.m.Good)
	for _, p := range s.d.parents[c] {
		parent := kernel{commit: int(p)}
		d, t, short, sharp := s.stepFrom(parent, kernel{commit: goodEndpoint})
		a, e := s.levels(parent), s.levels(kernel{commit: goodEndpoint})
		med, _ := s.way(parent)
		if noEarlierStep(d*toBad, med, t, short, sharp, len(a)+len(e), span) {
			continue
		}
		why := fmt.Sprintf("its parent measures %s the good endpoint (%d boots against %d, %.1f standard errors apart): an earlier commit made it worse first, and the candidate is the later of two steps; "+
			"bisect the earlier one with the parent as the bad revision", pct(d), len(a), len(e), t)
		// Short of a share, a parent asks for fresh boots but no decision
		// yet — unless the boots tell a share and put it beyond doubt
		// above the good endpoint, half a share up or more: that is no
		// good kernel, and the second search below it tells whether a
		// first step is there (7 → 8 → 15 µs: the parent sits at a share
		// of the model's way, and fell two standard errors short of it).
		if short > 0 && !(sharp && t >= stepT && d*toBad >= halfShare(span)) {
			t = stepMaybe
		}
		return why, int(p), t
	}
	return "", -1, 0
}

// noEarlierStep says whether a parent up (log) above the good endpoint
// by its boots' weighed mean, med by their median (way), t standard
// errors from it and short of a step's share of span by short, is ruled
// out as an earlier step on boots of the two together (earlierStep says
// why each rule).
//
// The median speaks where one far-off boot moves the mean: a boot that
// kept two samples of three, 0.49 below the parent's others, pulled its
// mean below the good endpoint's at four boots each, and under a
// standard error from it at twelve, while the median sat a step's share
// up (run 126 of `kbisect simulate --seed 1 --first-step 9us`, which
// named the later step at 1.0000). And a parent stepDoubt standard
// errors or more above the good endpoint, half a share up or more, is no
// good kernel however far short of a share it falls.
func noEarlierStep(up, med, t, short float64, sharp bool, boots int, span float64) bool {
	half := halfShare(span)
	if span < minStepSpan {
		med = 0 // no steps are told: the median rules below do not act
	}
	switch {
	case up <= 0:
		// Below it by the mean: level with it, unless the boots are few
		// and their median sits half a share up.
		return boots >= stepKnown || med < half
	case sharp:
		return short > stepClear && (t < stepDoubt || up < half)
	case short > 1:
		return true
	case t >= stepMaybe:
		return false
	}
	// Under a standard error away: level with the good endpoint, unless
	// it sits half a share up and the boots are too few to know their own
	// spread, or their median sits a whole share up.
	return up < half || (boots >= stepKnown && med < 2*half)
}

// twoSteps says whether the confirmation of c failed for the reason one
// step of two fails it. The bad endpoint without c (if it was booted)
// sits between the sides, a step's share or more from each, as a revert
// of either step leaves the other; and either c is the later step (a
// parent of c beyond doubt a step above the good endpoint, and between
// the sides) or the first (c itself beyond doubt unlike the bad endpoint,
// and between the sides); and every other kernel of the confirmation
// measures as the model has its side. A first step about half the way
// puts those kernels near the middle, where some of their boots read
// bad, and the check failed on them run after run (45 % of the runs at
// 7 → 10 → 15 µs ended inconclusive); the second search below the
// parent, or the first step named with the later one listed, is what
// they ask for.
func (s *Search) twoSteps(c int) bool {
	if s.sub != nil || s.frozen {
		return false
	}
	revert := target{commit: c, reverted: true}
	if _, ok := s.between(kernel{commit: c, reverted: true}); s.count(revert) > 0 && !ok {
		return false
	}
	mid := -1 // the kernel between the sides: the later step's parent, or the first step
	if _, parent, t := s.earlierStep(c); t >= stepT {
		if _, ok := s.between(kernel{commit: parent}); ok {
			mid = parent
		}
	}
	if _, t := s.laterStep(c); mid < 0 && t >= stepT {
		if _, ok := s.between(kernel{commit: c}); ok {
			mid = c
		}
	}
	return mid >= 0 && s.checkOf(c, func(t target) bool { return t == revert || t == target{commit: mid} }) == ""
}

// between says how far toward the bad side k's boots' median level sits
// from the good endpoint's, and whether that is a step's share or more of
// the way from each endpoint. The way is the endpoints' own boots'
// (medians): the model's levels, refit over commits of both steps, draw
// together — a first step half the way took a third of it off.
func (s *Search) between(k kernel) (float64, bool) {
	up, span := s.way(k)
	return up, span > 0 && up >= stepShare*span && up <= (1-stepShare)*span
}

// way is how far toward the bad side k's boots' median level sits from
// the good endpoint's, and how far the bad endpoint's does (0, 0 when
// any of the three has fewer than two boots).
func (s *Search) way(k kernel) (up, span float64) {
	ks, goods, bads := s.levels(k), s.levels(kernel{commit: goodEndpoint}), s.levels(kernel{commit: s.d.Len() - 1})
	if len(ks) < 2 || len(goods) < 2 || len(bads) < 2 {
		return 0, 0
	}
	toBad := math.Copysign(1, s.m.Bad-s.m.Good)
	return (median(ks) - median(goods)) * toBad, (median(bads) - median(goods)) * toBad
}

// stepUntold says, once the rounds of fresh boots are spent, why the
// parent's boots neither show an earlier step nor rule one out, when
// they put its level stepDoubt standard errors or more and half a step's
// share of the way or more above the good endpoint's ("" when they do
// not, or the boots scatter too far for a step's share to be told): the
// candidate may be the later of two steps, and naming it would pass over
// the first. Below stepDoubt, a parent of an ordinary run that happened
// to stay a little above the good endpoint through the rounds (2.5 % of
// the noisy row's runs at 1.9-2.8 standard errors) is named as before.
func (s *Search) stepUntold(parent int) string {
	if parent < 0 {
		return ""
	}
	d, t, _, sharp := s.stepFrom(kernel{commit: parent}, kernel{commit: goodEndpoint})
	span := math.Abs(s.m.Bad - s.m.Good)
	if !sharp || t < stepDoubt || d*math.Copysign(1, s.m.Bad-s.m.Good) < halfShare(span) {
		return ""
	}
	return fmt.Sprintf("its parent measures %s the good endpoint (%d boots against %d, %.1f standard errors apart) after %d rounds of fresh boots: "+
		"too far above it to be its level, too near to be a step of its own; an earlier commit may have made it worse first — bisect the parent against the good endpoint, or give the job a threshold",
		pct(d), len(s.levels(kernel{commit: parent})), len(s.levels(kernel{commit: goodEndpoint})), t, maxStepRounds)
}

// stepSamples is the least samples of a boot of target t in the
// confirmation of c: a parent's and the good endpoint's boots tell an
// earlier step, whose share of the way a boot of the search's few
// samples scatters over (3 samples at a spread of 0.2: ±0.12 in log,
// against a step's share of 0.15 at 7 → 15 µs); 0 when the search's
// least will do (the regression too small for steps to be told).
func (s *Search) stepSamples(c int, t target) int {
	if t.reverted || t.commit == c || t.commit == s.d.Len()-1 || math.Abs(s.m.Bad-s.m.Good) < minStepSpan {
		return 0
	}
	return stepLeast
}

// maxStepRounds bounds the rounds of fresh boots an earlier step that
// the boots only suggest asks for.
const maxStepRounds = 10

// laterStep says, of a found candidate c, whether it measures unlike
// the bad endpoint: a later commit of the range made the regression
// worse, or partly fixed it ("" when it does not), and how many standard
// errors apart the two are (stepT shows it, stepDoubt suggests it;
// laterMaybe asks for fresh boots more, up to maxLaterRounds).
func (s *Search) laterStep(c int) (string, float64) {
	if c == s.d.Len()-1 {
		return "", 0
	}
	d, t, short, _ := s.stepFrom(kernel{commit: c}, kernel{commit: s.d.Len() - 1})
	if t < stepMaybe || short > 0 {
		return "", 0
	}
	what := "made it worse again"
	if d*math.Copysign(1, s.m.Bad-s.m.Good) > 0 {
		what = "partly fixed it"
	}
	return fmt.Sprintf("a later step: the candidate measures %s the bad endpoint (%.1f standard errors apart), so a later commit of the range %s", pct(d), t, what), t
}

// laterMaybe is the least distance, in standard errors, at which a later
// step asks for fresh boots, and maxLaterRounds bounds their rounds: it is
// listed beside the answer, not the answer, and spends fewer.
const (
	laterMaybe     = 2.5
	maxLaterRounds = 4
)

// pct says a difference of log levels as a share: "28 % above".
func pct(d float64) string {
	if d >= 0 {
		return fmt.Sprintf("%.0f %% above", 100*(math.Exp(d)-1))
	}
	return fmt.Sprintf("%.0f %% below", 100*(1-math.Exp(d)))
}

// strayless leaves out of a kernel's boot levels those further from
// their median than four of their scatter (the median distance, or at
// least what a boot's samples alone put on its level, within over their
// number): a boot most of whose few samples spiked, or that sat on the
// other side.
func strayless(ls []bootLevel, within float64) []bootLevel {
	if len(ls) < 3 {
		return ls
	}
	at := make([]float64, len(ls))
	for i, l := range ls {
		at[i] = l.at
	}
	m := median(at)
	dev := make([]float64, len(ls))
	for i, l := range ls {
		dev[i] = math.Abs(l.at - m)
	}
	r := 1.4826 * median(dev)
	var out []bootLevel
	for _, l := range ls {
		if math.Abs(l.at-m) <= 4*math.Max(r, math.Sqrt(within/float64(max(l.n, 1)))) {
			out = append(out, l)
		}
	}
	return out
}
