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

// level is a boot's level: the mean of its samples' logs within three
// spreads of their median (a spike is not the level), less the machine's
// drift at the boot.
func (b *weighed) level(spread float64) float64 {
	m := median(b.r.ys)
	sum, n := 0.0, 0
	for _, y := range b.r.ys {
		if math.Abs(y-m) <= 3*spread {
			sum += y
			n++
		}
	}
	if n == 0 {
		return m - b.drift // the two middle samples far apart: their mean
	}
	return sum/float64(n) - b.drift
}

// levels are the boot levels of a kernel, in order.
func (s *Search) levels(k kernel) []float64 {
	var out []float64
	for _, b := range s.w.boots {
		if b.kernel == k && !b.r.empty() {
			out = append(out, b.level(s.m.Spread))
		}
	}
	return out
}

// stepFrom compares a kernel's boots with an endpoint's: how far (log)
// its level sits from the endpoint's, how many standard errors that is
// (Welch's t; each kernel's variance its boots', not the model's: a
// model learned across two steps has its spreads widened by them), and
// how many standard errors the distance falls short of a step's share of
// the way from good to bad (0 or less: it is a step's share) — t 0 when
// either has fewer than two boots or the regression is too small for
// steps to be told.
func (s *Search) stepFrom(k, endpoint kernel) (d, t, short float64) {
	a, e := s.levels(k), s.levels(endpoint)
	if len(a) < 2 || len(e) < 2 {
		return 0, 0, 0
	}
	ma, va := meanVar(a)
	me, ve := meanVar(e)
	d = ma - me
	span := math.Abs(s.m.Bad - s.m.Good)
	if span < minStepSpan {
		return d, 0, 0
	}
	se := math.Sqrt(va/float64(len(a)) + ve/float64(len(e)) + 1e-12)
	return d, math.Abs(d) / se, (stepShare*span - math.Abs(d)) / se
}

// earlierStep says, when a parent of candidate c measures worse than the
// good endpoint by a step's share of the way, that c may not be the first
// commit that made it worse ("" when no parent does), which parent, and how many
// standard errors apart the two are: stepT shows it beyond doubt,
// stepMaybe only suggests it (fresh boots more of the parent and the
// good endpoint will tell), stepDoubt after those is doubt enough not to
// name c. A parent a standard error or more apart from the good endpoint
// (stepMaybe) whose distance is short of a step's share by less than one
// standard error may still be one — the learned levels a step between
// them pulled towards each other, or its few boots fell low: it asks for
// fresh boots, and is told no step only once they put it short by more
// (or the rounds are spent).
func (s *Search) earlierStep(c int) (string, int, float64) {
	toBad := math.Copysign(1, s.m.Bad-s.m.Good)
	for _, p := range s.d.parents[c] {
		parent := kernel{commit: int(p)}
		d, t, short := s.stepFrom(parent, kernel{commit: goodEndpoint})
		if d*toBad <= 0 || t < stepMaybe || short > 1 {
			continue
		}
		a, e := s.levels(parent), s.levels(kernel{commit: goodEndpoint})
		why := fmt.Sprintf("its parent measures %s the good endpoint (%d boots against %d, %.1f standard errors apart): an earlier commit made it worse first, and the candidate is the later of two steps; "+
			"bisect the earlier one with the parent as the bad revision", pct(d), len(a), len(e), t)
		if short > 0 {
			t = stepMaybe // fresh boots more, but no decision yet
		}
		return why, int(p), t
	}
	return "", -1, 0
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
	ks, goods, bads := s.levels(k), s.levels(kernel{commit: goodEndpoint}), s.levels(kernel{commit: s.d.Len() - 1})
	if len(ks) < 2 || len(goods) < 2 || len(bads) < 2 {
		return 0, false
	}
	toBad := math.Copysign(1, s.m.Bad-s.m.Good)
	span := (median(bads) - median(goods)) * toBad
	up := (median(ks) - median(goods)) * toBad
	return up, span > 0 && up >= stepShare*span && up <= (1-stepShare)*span
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
	d, t, short := s.stepFrom(kernel{commit: c}, kernel{commit: s.d.Len() - 1})
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

func meanVar(xs []float64) (float64, float64) {
	m := 0.0
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	v := 0.0
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return m, v / float64(len(xs)-1)
}
