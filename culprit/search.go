package culprit

import (
	"fmt"
	"math"
)

// Search is a noise-robust bisection: a posterior over which commit of
// the range is the first bad one, fed boot by boot, and the choice of the
// measurement that says the most per second.
type Search struct {
	d   *DAG
	m   Model
	opt Options
	w   *weigher
	// drift is the machine's drift as the boots of known side show it.
	drift drift
	built []bool
	skip  []bool
	boots []int
	// reverted counts the boots of the bad endpoint with a commit
	// reverted; noRevert marks reverts the lab could not make.
	reverted map[int]int
	noRevert map[int]bool
	// total counts the search's boots (its budget); runBoots every boot
	// taken in, calibration's too: the next boot's place in the run.
	total, runBoots int
	// goodBoots counts the good endpoint's boots; lastGood and lastBad
	// are the run's boots of each endpoint's latest.
	goodBoots, lastGood, lastBad int
	gain                         gainTable
	leastWhy                     string
	// confirmFrom is, per candidate that reached the confidence, the
	// boots each kernel of its confirmation had then; extra the fresh
	// boots more each asks for after a check that failed, and checked
	// why the last one failed; stepExtra the fresh boots more of the
	// parents and the good endpoint that tell an earlier step, laterExtra
	// those of it and the bad endpoint that tell a later one (steps.go).
	confirmFrom map[int]map[target]int
	extra       map[int]int
	stepExtra   map[int]int
	laterExtra  map[int]int
	checked     map[int]string
	log         []Observation
	// frozen marks a fork: it takes boots in without learning its model
	// again.
	frozen bool
	// least, when set, is the least samples of the boot the last step
	// asked for (Stopper): a confirmation's boot that tells an earlier
	// step (steps.go).
	least int
	// budget says the budget of boots is the search's own (Budget): it
	// grows when the model learns that a boot tells less.
	budget bool
	// sub, once the search converged on the later of two steps, is the
	// second search below its parent, which the search delegates to
	// (below.go).
	sub *below
}

// New starts a search over the range d under the model m.
func New(d *DAG, m Model, opt Options) (*Search, error) {
	if d.Len() == 0 {
		return nil, fmt.Errorf("culprit: an empty range has no culprit")
	}
	if err := opt.defaults(d.Len()); err != nil {
		return nil, err
	}
	m = m.filled()
	if err := m.Validate(); err != nil {
		return nil, err
	}
	s := &Search{d: d, m: m, opt: opt,
		built: make([]bool, d.Len()), skip: make([]bool, d.Len()), boots: make([]int, d.Len()),
		reverted: map[int]int{}, noRevert: map[int]bool{}, confirmFrom: map[int]map[target]int{},
		extra: map[int]int{}, stepExtra: map[int]int{}, laterExtra: map[int]int{}, checked: map[int]string{}, lastGood: -1, lastBad: -1}
	s.w = newWeigher(d, &s.m, opt.Prior, opt.NoCulprit)
	if opt.FromOne {
		s.opt.MinSamples, s.leastWhy = leastSamples(s.m, opt.MinSamples, opt.MaxSamples, opt.Costs)
	}
	s.built[d.Len()-1] = true
	s.gain = newGainTable(s.m, s.opt.MinSamples)
	s.budget = opt.MaxBoots == 0
	if s.budget {
		s.opt.MaxBoots = Budget(d.Len(), s.gain)
	}
	return s, nil
}

// Least is the fewest samples a boot gives, and, when the job left it to
// kbisect (Options.FromOne) and the sides lie far apart, why: a line for
// the run's log.
func (s *Search) Least() (int, string) { return s.opt.MinSamples, s.leastWhy }

// Model is the model the search judges boots by: its best guesses now.
func (s *Search) Model() Model { return s.m }

// Boots is how many boots the search has taken in (calibration's not
// counted).
func (s *Search) Boots() int { return s.total }

// MaxBoots is the search's budget of boots.
func (s *Search) MaxBoots() int {
	if s.sub != nil {
		return s.total + s.sub.s.opt.MaxBoots - s.sub.s.total
	}
	return s.opt.MaxBoots
}

// Log is every observation, in order.
func (s *Search) Log() []Observation { return append([]Observation(nil), s.log...) }

// Built records that a commit's kernel is built: booting it again costs
// no build.
func (s *Search) Built(commit int) {
	if commit >= 0 && commit < len(s.built) {
		s.built[commit] = true
		if s.sub != nil && s.sub.inner[commit] >= 0 {
			s.sub.s.Built(int(s.sub.inner[commit]))
		}
	}
}

// More says whether the boot whose samples these are should give another
// one: while it is unsure, below the most samples a boot may give, and
// while more samples still tell more than the level scatters from boot
// to boot (or the sides differ in how often they spike, which every
// sample tells of).
func (s *Search) More(samples []float64) bool { return s.Stopper()(samples) }

// Stopper is More as the search stands now, for a boot that runs while
// the search takes in others' (several machines): it holds a copy of
// the model and the drift, and reads nothing of the search after.
func (s *Search) Stopper() func(samples []float64) bool {
	if s.sub != nil {
		return s.sub.s.Stopper()
	}
	m, opt := s.m, s.opt
	least := min(max(opt.MinSamples, s.least), opt.MaxSamples)
	dr, _ := s.drift.at(s.runBoots)
	return func(samples []float64) bool {
		n := len(samples)
		switch {
		case n < least:
			return true
		case n >= opt.MaxSamples:
			return false
		}
		if spiking(m, samples) {
			// Its samples spike: the next ones tell how often this kernel
			// does, which a regression may be about.
			return true
		}
		if !m.spiky() && m.Spread*m.Spread/float64(n) < m.BootSpread*m.BootSpread/4 {
			return false
		}
		e := m.quickEvidence(samples, dr)
		shows, wrong := m.rates(n)
		if e > 0 {
			return e < 0.75*math.Log(shows/wrong)
		}
		return -e < 0.75*math.Log((1-wrong)/(1-shows))
	}
}

// spiking says a boot's samples include a spike: one more than four
// spreads above their median.
func spiking(m Model, samples []float64) bool {
	r := newReading(samples)
	if len(r.ys) < 2 {
		return false
	}
	return r.ys[len(r.ys)-1] > median(r.ys)+4*m.Spread
}

// Observe takes in one boot of what step asked to measure, and returns
// what it says (log "like bad" over "like good").
func (s *Search) Observe(step Step, samples []float64) float64 {
	return s.observe(Observation{Commit: step.Commit, Reverted: step.Reverted, Confirming: step.Confirming, Samples: samples})
}

// ObserveAt takes in a boot of an endpoint the search did not ask for:
// calibration's boots of the good endpoint (GoodEndpoint) and of the bad
// one (the range's last commit), in the order they were measured.
func (s *Search) ObserveAt(commit int, samples []float64) float64 {
	return s.observe(Observation{Commit: commit, Samples: samples, Endpoint: true})
}

// Skip records that what step asked for cannot be measured (the commit
// does not build or boot, the revert does not apply): it is never asked
// for again, and its candidacy rests on its neighbours.
func (s *Search) Skip(step Step) {
	s.observe(Observation{Commit: step.Commit, Reverted: step.Reverted, Confirming: step.Confirming, Skipped: true})
}

// Replay takes in an observation from an earlier run's log.
func (s *Search) Replay(o Observation) {
	if s.sub != nil {
		o.Evidence = s.sub.take(o, true)
		s.keep(o)
		return
	}
	pc, none := s.Probabilities()
	lead := leading(pc, 0, 1)[0]
	s.settle(lead)
	if lead.Probability >= s.opt.Confidence && none < s.opt.Confidence && s.total < s.opt.MaxBoots {
		// Next began the confirmation of the candidate leading now (or
		// reviewed it), and counts its fresh boots from here: without
		// it, a resumed search would take the boots of a confirmation
		// under way again. On several machines the boots that end
		// after it began count as fresh whether they were asked for
		// the confirmation or before it.
		s.confirmStep(lead, pc)
	}
	s.observe(o)
}

func (s *Search) observe(o Observation) float64 {
	if s.sub != nil {
		o.Evidence = s.sub.take(o, false)
		s.keep(o)
		return o.Evidence
	}
	if !o.Skipped {
		at := s.runBoots
		dr, dv := s.drift.at(at)
		s.w.add(kernel{commit: o.Commit, reverted: o.Reverted}, at, newReading(o.Samples), dr, math.Sqrt(s.m.BootSpread*s.m.BootSpread+dv))
		o.Evidence = s.m.quickEvidence(o.Samples, dr)
		switch {
		case o.Commit == goodEndpoint:
			s.lastGood = at
		case !o.Reverted && o.Commit == s.d.Len()-1:
			s.lastBad = at
		}
	}
	s.keep(o)
	if !o.Skipped && !s.frozen {
		if s.runBoots%refreshEvery == 0 {
			s.refresh()
		}
		if !o.Endpoint && s.total%refitEvery == 0 {
			s.refit()
		}
	}
	return o.Evidence
}

// Evidence is what a boot of these samples would say now, in log odds
// of "bad" over "good" (what Observe returns for it), at the model's
// best guesses.
func (s *Search) Evidence(samples []float64) float64 {
	if s.sub != nil {
		return s.sub.s.Evidence(samples)
	}
	dr, _ := s.drift.at(s.runBoots)
	return s.m.quickEvidence(samples, dr)
}

// Probabilities are each commit's probability of being the first bad
// one, and the probability that none is.
func (s *Search) Probabilities() ([]float64, float64) {
	if s.sub != nil {
		return s.sub.probabilities(s.d.Len())
	}
	p := s.w.posterior()
	return p.pc, p.none
}

// Leading lists the most probable culprits until they hold the
// confidence's mass (at most k).
func (s *Search) Leading(k int) []Candidate {
	pc, _ := s.Probabilities()
	return leading(pc, s.opt.Confidence, k)
}

// Badness is each commit's probability of being bad: the mass of the
// culprits among its ancestors-or-self.
func (s *Search) Badness() []float64 {
	pc, _ := s.Probabilities()
	return s.d.badness(pc)
}

// BootsOf is how many boots a commit has had (GoodEndpoint: the good
// endpoint's).
func (s *Search) BootsOf(commit int) int {
	if commit == goodEndpoint {
		return s.goodBoots
	}
	return s.boots[commit]
}

// Drifting says whether the machine was found to drift, and by how much
// its level has moved since the run began (log scale).
func (s *Search) Drifting() (bool, float64) {
	if s.sub != nil {
		return s.sub.s.Drifting()
	}
	d, _ := s.drift.at(s.runBoots)
	first, _ := s.drift.at(0)
	return s.drift.drifting(), d - first
}

// SetCosts says what a build, a boot and a sample cost now that the lab
// has measured them; the next choices weigh them.
func (s *Search) SetCosts(c Costs) {
	if c.Build > 0 && c.Boot > 0 && c.Sample > 0 {
		s.opt.Costs = c
		if s.sub != nil {
			s.sub.s.SetCosts(c)
		}
	}
}

// Next says what to measure next, or how the search ends.
func (s *Search) Next() Step {
	if s.sub != nil {
		return s.sub.next()
	}
	s.least = 0
	pc, none := s.Probabilities()
	lead := leading(pc, 0, 1)[0]
	conf := s.opt.Confidence
	if none >= conf {
		return Step{Kind: NotReproduced, Probability: none, Candidates: leading(pc, conf, 5),
			Reason: fmt.Sprintf("the range most likely holds no bad commit (probability %.3g after %d boots): the bad endpoint measures like the good one", none, s.total)}
	}
	s.settle(lead)
	if s.total >= s.opt.MaxBoots {
		reason := fmt.Sprintf("the budget of %d boots ran out with no commit at probability %g (the most probable: %.3g)", s.opt.MaxBoots, conf, lead.Probability)
		if lead.Probability >= conf {
			reason = fmt.Sprintf("the budget of %d boots ran out while fresh boots confirmed the most probable commit (at %.4g)", s.opt.MaxBoots, lead.Probability)
		}
		if why := s.checked[lead.Commit]; why != "" {
			reason += "; " + why
		}
		return Step{Kind: Inconclusive, Probability: lead.Probability, Candidates: leading(pc, conf, 10), Reason: reason}
	}
	if lead.Probability >= conf {
		if step, ok := s.confirmStep(lead, pc); ok {
			return step
		}
	}
	if c, due := s.controlDue(); due {
		return Step{Kind: Measure, Commit: c, Probability: lead.Probability}
	}
	x, g := s.choose(pc)
	if x < 0 || g < minGain {
		return Step{Kind: Inconclusive, Probability: lead.Probability, Candidates: leading(pc, conf, 10),
			Reason: "no commit that can be measured tells the leading candidates apart (they are skipped, or next to skipped commits)"}
	}
	return Step{Kind: Measure, Commit: x, Probability: lead.Probability}
}

// confirmStep is what Next asks when the lead has reached the
// confidence: a fresh boot of its confirmation, or the end its review
// gives; false when the kernel the confirmation needs is skipped (the
// search goes on).
func (s *Search) confirmStep(lead Candidate, pc []float64) (Step, bool) {
	for {
		if t, ok := s.confirmNext(lead.Commit); ok {
			if t.reverted || t.commit == goodEndpoint || !s.skip[t.commit] {
				s.least = s.stepSamples(lead.Commit, t)
				return Step{Kind: Measure, Commit: t.commit, Reverted: t.reverted, Confirming: true, Probability: lead.Probability}, true
			}
			return Step{}, false
		}
		if end := s.review(lead, pc); end != nil {
			return *end, true
		}
		if s.sub != nil {
			return s.sub.next(), true // the lead is the later of two steps
		}
	}
}

// maxChecks is how many times a candidate's confirmation may find the
// boots unlike the model before the search says it cannot tell.
const maxChecks = 3

// controlDue says an endpoint is due a boot, and which: the machine's
// drift is followed by the endpoints' boots, one every ControlEvery
// boots, thrice as often once it is found to drift, the endpoint booted
// longer ago first. The bad endpoint's boots also show how often the
// regression shows on a boot, which the search's own boots of bad
// commits cannot tell from the good commits' boots on the wrong side.
func (s *Search) controlDue() (int, bool) {
	every := s.opt.ControlEvery
	if every < 0 {
		return 0, false
	}
	if s.drift.drifting() {
		every = max(every/3, 2)
	}
	last := max(s.lastGood, s.lastBad)
	if s.runBoots-last <= every {
		return 0, false
	}
	if s.lastBad < s.lastGood {
		return s.d.Len() - 1, true
	}
	return goodEndpoint, true
}

// Format writes a probability with the digits that matter: 0.997,
// >0.9999 (never 1: no number of boots makes a culprit certain).
func Format(p float64) string {
	switch {
	case p >= 0.99995:
		return ">0.9999"
	case p >= 0.99:
		return fmt.Sprintf("%.4f", math.Floor(p*1e4)/1e4)
	}
	return fmt.Sprintf("%.3g", p)
}

// Shape says, in words for the answer, where the regression and the
// machine are not the plain case the model starts from: a regression
// that shows on some boots only, one in how often the machine spikes, a
// machine that drifted over the run. Nothing when none is.
func (s *Search) Shape() []string {
	if s.sub != nil {
		return s.sub.s.Shape()
	}
	var out []string
	m := s.m
	switch {
	case m.Shows >= 0.4 && m.Shows <= 0.6:
		out = append(out, "the regression shows on about half of a bad kernel's boots (the others measure as a good kernel's): a boot that measures good says little")
	case m.Shows < 0.85:
		out = append(out, fmt.Sprintf("the regression shows on about %.0f %% of a bad kernel's boots (the others measure as a good kernel's): a boot that measures good says little", 5*math.Round(20*m.Shows)))
	}
	if m.spiky() && m.Bad-m.Good < 2*m.Spread {
		out = append(out, fmt.Sprintf("the regression is in how often the machine spikes: %.0f %% of a bad kernel's samples spike, %.0f %% of a good one's, at about the same level", 100*m.SpikesBad, 100*m.SpikesGood))
	}
	if drifting, by := s.Drifting(); drifting {
		out = append(out, fmt.Sprintf("the machine drifted: its level moved by %+.0f %% over the run, and each boot was weighed against the level it had then", 100*(math.Exp(by)-1)))
	}
	return out
}
