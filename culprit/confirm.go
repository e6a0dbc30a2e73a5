package culprit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
)

// settle forgets the confirmation of every candidate that does not lead
// at the confidence now: should it lead again, its fresh boots start
// again, so that a confirmation is boots in a row that agree. Next does
// it before each step, and Replay before each observation, alike.
func (s *Search) settle(lead Candidate) {
	for c := range s.confirmFrom {
		if c != lead.Commit || lead.Probability < s.opt.Confidence {
			delete(s.confirmFrom, c)
			delete(s.extra, c)
			delete(s.stepExtra, c)
			delete(s.laterExtra, c)
			delete(s.checked, c)
		}
	}
}

// review decides a confirmation of the lead that had all its fresh boots:
// the end (found, or inconclusive when the model's check failed too often
// or the lead is the later of two steps), or nil with more fresh boots
// asked for (a check that failed, a step to tell). Next and Replay alike.
func (s *Search) review(lead Candidate, pc []float64) *Step {
	conf := s.opt.Confidence
	c := lead.Commit
	why := s.revertStillBad(c)
	if why == "" {
		why = s.check(c)
	}
	if why != "" && s.twoSteps(c) {
		why = "" // the lead is one step of two (steps.go): see below
	}
	if why == "" {
		// A parent clearly worse than the good endpoint, once it had
		// fresh boots more: the lead is a later step, and a second
		// search below the parent goes on. A parent that may be, or a
		// later step that may show, asks for them.
		step, parent, t := s.earlierStep(c)
		_, tl := s.laterStep(c)
		rounds, untold := s.stepExtra[c], ""
		if step != "" && rounds >= maxStepRounds {
			untold = s.stepUntold(parent)
		}
		switch {
		case t >= stepT && rounds > 0, t >= stepDoubt && rounds >= maxStepRounds:
			if s.descend(c, parent, lead.Probability) {
				return nil // the second search below the parent goes on
			}
			return &Step{Kind: Inconclusive, Probability: lead.Probability, Candidates: leading(pc, conf, 10),
				Reason: fmt.Sprintf("the most probable commit leads at %s, but %s", Format(lead.Probability), step)}
		case step != "" && rounds < maxStepRounds:
			s.stepExtra[c]++
			return nil
		case untold != "":
			return &Step{Kind: Inconclusive, Probability: lead.Probability, Candidates: leading(pc, conf, 10),
				Reason: fmt.Sprintf("the most probable commit leads at %s, but %s", Format(lead.Probability), untold)}
		case tl >= laterMaybe && tl < stepT && s.laterExtra[c] < maxLaterRounds:
			s.laterExtra[c]++
			return nil
		}
		by := "it and its parents"
		if s.opt.Revert && c != s.d.Len()-1 && !s.noRevert[c] {
			by = "it, its parents and the bad endpoint without it"
		}
		reason := fmt.Sprintf("probability %s after %d boots, confirmed by fresh boots of %s and of both endpoints", Format(lead.Probability), s.total, by)
		switch later, t := s.laterStep(c); {
		case t >= stepT:
			reason += "; " + later
		case t >= stepDoubt:
			reason += "; perhaps " + later
		}
		return &Step{Kind: Found, Commit: c, Probability: lead.Probability, Candidates: leading(pc, conf, 5), Reason: reason}
	}
	if s.extra[c] >= maxChecks-1 {
		return &Step{Kind: Inconclusive, Probability: lead.Probability, Candidates: leading(pc, conf, 10),
			Reason: fmt.Sprintf("%s leads at %s, but the boots do not measure as the model has the two sides: %s", "the most probable commit", Format(lead.Probability), why)}
	}
	s.failCheck(c)
	s.checked[c] = why
	return nil
}

// confirmTargets are the kernels whose fresh boots confirm c, parents
// first, then c, then the bad endpoint without c, then the endpoints.
func (s *Search) confirmTargets(c int) []target {
	var targets []target
	for _, p := range s.d.parents[c] {
		if !s.skip[p] {
			targets = append(targets, target{commit: int(p)})
		}
	}
	targets = append(targets, target{commit: c})
	if s.opt.Revert && c != s.d.Len()-1 && !s.noRevert[c] {
		targets = append(targets, target{commit: c, reverted: true})
	}
	targets = append(targets, target{commit: goodEndpoint})
	if c != s.d.Len()-1 {
		targets = append(targets, target{commit: s.d.Len() - 1})
	}
	return targets
}

// need is how many fresh boots t needs in c's confirmation: ConfirmBoots
// of c, its parents and the revert, one of each endpoint (which are
// measured apart from the search, and show whether the machine still
// measures them as it did); one more each after every check that failed.
//
// A parent of c gets more where the regression shows on some boots only:
// as many as would show a bad parent's regression at least once but for
// a chance of parentMissed (7 at a regression that shows on half the
// boots) — a bad parent whose few fresh boots all measured good is how
// an intermittent regression names a commit after the culprit.
func (s *Search) need(c int, t target) int {
	n := s.opt.ConfirmBoots
	if t.commit == goodEndpoint || (t.commit == s.d.Len()-1 && c != t.commit && !t.reverted) {
		n = max(1, n/2)
	}
	if !t.reverted && t.commit != c && t.commit != goodEndpoint && t.commit != s.d.Len()-1 && s.m.Shows < 1 {
		n = max(n, min(int(math.Ceil(math.Log(parentMissed)/math.Log(1-s.m.Shows))), maxParentBoots))
	}
	switch {
	case t.reverted:
	case t.commit == c || t.commit == s.d.Len()-1:
		n += s.laterExtra[c] // c and the bad endpoint tell a later step: steps.go
	default:
		n += s.stepExtra[c] // the parents and the good endpoint, an earlier one
	}
	return n + s.extra[c]
}

// parentMissed is the chance that every fresh boot of a bad parent in a
// confirmation measures good, from which their number is set;
// maxParentBoots caps it (a regression that shows on one boot in ten).
const (
	parentMissed   = 0.01
	maxParentBoots = 16
)

// confirmNext is the next kernel the confirmation of c needs, the one
// with the fewest fresh boots (so that they alternate); false when each
// has had its fresh boots.
func (s *Search) confirmNext(c int) (target, bool) {
	targets := s.confirmTargets(c)
	from := s.confirmFrom[c]
	if from == nil {
		from = map[target]int{}
		for _, t := range targets {
			from[t] = s.count(t)
			// An endpoint measured a few boots ago is measured afresh.
			if (t.commit == goodEndpoint && s.lastGood >= s.runBoots-freshWithin) ||
				(t.commit == s.d.Len()-1 && t.commit != c && !t.reverted && s.lastBad >= s.runBoots-freshWithin) {
				from[t]--
			}
		}
		s.confirmFrom[c] = from
	}
	best, fewest := target{}, math.MaxInt
	for _, t := range targets {
		if _, ok := from[t]; !ok {
			from[t] = s.count(t)
		}
		if fresh := s.count(t) - from[t]; fresh < s.need(c, t) && fresh < fewest {
			best, fewest = t, fresh
		}
	}
	return best, fewest != math.MaxInt
}

// freshWithin is how many boots back an endpoint's boot still counts as
// a fresh one for a confirmation that begins.
const freshWithin = 6

// failCheck asks c's confirmation for one more fresh boot of each kernel.
func (s *Search) failCheck(c int) { s.extra[c]++ }

func (s *Search) count(t target) int {
	switch {
	case t.reverted:
		return s.reverted[t.commit]
	case t.commit == goodEndpoint:
		return s.goodBoots
	}
	return s.boots[t.commit]
}

type target struct {
	commit   int
	reverted bool
}

// checkAt is the chance under the model below which the fresh boots of a
// confirmation are taken as not measuring as the model has the sides.
const checkAt = 0.001

// check is the confirmation's test of the model itself: the fresh boots
// of c, its parents, the revert and the endpoints must look like the
// sides the model learned — each boot's evidence no further toward the
// other side than boots of its side drawn from the model would be
// (a posterior-predictive check, the boots' chances combined by
// Fisher's method). "" when they do; else which kernels do not, and what
// that suggests.
func (s *Search) check(c int) string { return s.checkOf(c, nil) }

// checkOf is check with the kernels except names left out.
func (s *Search) checkOf(c int, except func(target) bool) string {
	from := s.confirmFrom[c]
	rng := rand.New(rand.NewPCG(uint64(c)+1, uint64(s.runBoots)))
	type worst struct {
		t    target
		logp float64
		n    int
	}
	byKernel := map[target]*worst{}
	total := 0.0
	k := 0
	for _, t := range s.confirmTargets(c) {
		fresh := s.count(t) - from[t]
		if fresh <= 0 || (except != nil && except(t)) {
			continue
		}
		bad := t.commit == c && !t.reverted || t.commit == s.d.Len()-1 && !t.reverted
		var seen []*weighed
		for _, b := range s.w.boots {
			if b.kernel == (kernel{commit: t.commit, reverted: t.reverted}) {
				seen = append(seen, b)
			}
		}
		for _, b := range seen[max(len(seen)-fresh, 0):] {
			if b.r.empty() {
				continue
			}
			e := s.m.quickEvidence(expAll(b.r.ys), b.drift)
			p := s.tail(rng, bad, len(b.r.ys), e)
			w := byKernel[t]
			if w == nil {
				w = &worst{t: t}
				byKernel[t] = w
			}
			w.logp += math.Log(p)
			w.n++
			total += math.Log(p)
			k++
		}
	}
	if k == 0 || chiSquareTail(-2*total, 2*k) >= checkAt {
		return ""
	}
	var ws []*worst
	for _, w := range byKernel {
		ws = append(ws, w)
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].logp < ws[j].logp })
	var parts []string
	for _, w := range ws {
		if chiSquareTail(-2*w.logp, 2*w.n) >= 0.01 {
			break
		}
		parts = append(parts, s.unlike(c, w.t))
	}
	if len(parts) == 0 {
		parts = append(parts, "the fresh boots together")
	}
	return fmt.Sprintf("%s measure unlike the model's sides (a chance of %.1g under it)%s", strings.Join(parts, ", "), chiSquareTail(-2*total, 2*k), s.suspect(ws[0].t, c))
}

// revertStillBad says, when most of the fresh boots of the bad endpoint
// without c read bad, that the revert does not take the regression away
// ("" when it does, or there is no revert). The check above weighs each
// boot by the model, and a model whose refits took contradictions for
// boots on the wrong side (a boot level that wanders for many boots can
// do that) lets such a revert pass; a strict majority of its boots on the
// bad side is never what the culprit's revert measures, but for boots on
// the wrong side (5 % of them: both of two in 1 run of 400).
func (s *Search) revertStillBad(c int) string {
	from := s.confirmFrom[c]
	t := target{commit: c, reverted: true}
	fresh := s.count(t) - from[t]
	if !s.opt.Revert || fresh <= 0 {
		return ""
	}
	var seen []*weighed
	for _, b := range s.w.boots {
		if b.kernel == (kernel{commit: c, reverted: true}) && !b.r.empty() {
			seen = append(seen, b)
		}
	}
	bad, n := 0, 0
	for _, b := range seen[max(len(seen)-fresh, 0):] {
		n++
		if s.m.quickEvidence(expAll(b.r.ys), b.drift) > 0 {
			bad++
		}
	}
	if n == 0 || 2*bad <= n {
		return ""
	}
	return fmt.Sprintf("the bad endpoint without the candidate measures bad on %d of its %d fresh boots: the revert does not take the regression away", bad, n)
}

// unlike names a kernel of c's confirmation as its role.
func (s *Search) unlike(c int, t target) string {
	switch {
	case t.reverted:
		return "the bad endpoint without the candidate"
	case t.commit == goodEndpoint:
		return "the good endpoint's fresh boots"
	case t.commit == c && c == s.d.Len()-1:
		return "the candidate's (the bad endpoint's) fresh boots"
	case t.commit == c:
		return "the candidate's fresh boots"
	case t.commit == s.d.Len()-1:
		return "the bad endpoint's fresh boots"
	}
	return "its parent's fresh boots"
}

// suspect says what a kernel that measures unlike its side suggests.
func (s *Search) suspect(t target, c int) string {
	drifting, moved := s.Drifting()
	switch {
	case t.commit == goodEndpoint || (t.commit == s.d.Len()-1 && !t.reverted && t.commit != c):
		if drifting {
			return fmt.Sprintf(": the machine drifts (%+.0f %% since the run began), faster than its boots of the good endpoint follow", 100*(math.Exp(moved)-1))
		}
		return ": the endpoints no longer measure as they did (has the machine drifted, or its set-up changed?)"
	case t.commit == c:
		return ": the candidate's boots sit where neither side's do (a second change in the range, or a regression smaller than calibration measured)"
	}
	return ": a good kernel measures bad (an earlier change, or one that shows on some boots only)"
}

// tail is the chance that a boot of n samples on the given side, drawn
// from the model, says e or more toward the other side.
func (s *Search) tail(rng *rand.Rand, bad bool, n int, e float64) float64 {
	const draws = 200
	hits := 1
	for i := 0; i < draws; i++ {
		d := s.m.quickEvidence(s.m.drawBoot(rng, bad, n), 0)
		if (bad && d <= e) || (!bad && d >= e) {
			hits++
		}
	}
	return float64(hits) / (draws + 1)
}

func expAll(ys []float64) []float64 {
	out := make([]float64, len(ys))
	for i, y := range ys {
		out[i] = math.Exp(y)
	}
	return out
}

// chiSquareTail is P(χ²_k ≥ x) for an even k: the chance, under the model,
// that k/2 boots' chances combine to one as small.
func chiSquareTail(x float64, k int) float64 {
	// For even k, P = e^{−x/2} Σ_{i<k/2} (x/2)^i / i!.
	h := x / 2
	term, sum := 1.0, 1.0
	for i := 1; i < k/2; i++ {
		term *= h / float64(i)
		sum += term
	}
	return math.Min(1, math.Exp(-h)*sum)
}
