package culprit

import (
	"fmt"
	"math"
)

// Costs are what a measurement costs, in seconds: building a commit's
// kernel (once), booting it, taking one sample.
type Costs struct {
	Build  float64 `json:"build"`
	Boot   float64 `json:"boot"`
	Sample float64 `json:"sample"`
}

// Options set a search.
type Options struct {
	// Confidence is the probability one commit must reach, confirmed, to
	// be named the first bad commit (default 0.99).
	Confidence float64
	// MaxBoots is the budget of boots (calibration not counted); when it
	// runs out the search is inconclusive. 0: 6 per step git would take,
	// plus 20.
	MaxBoots int
	// MinSamples and MaxSamples bound the samples of one boot.
	MinSamples, MaxSamples int
	// FromOne lets a boot start with one sample where the model finds one
	// decisive (the job left the minimum to kbisect): MinSamples is then
	// the minimum elsewhere.
	FromOne bool
	// ConfirmBoots is how many fresh boots each of the candidate, its
	// parents and the bad endpoint without it get once the candidate
	// reaches the confidence (default 2).
	ConfirmBoots int
	// Revert says the lab can build the bad endpoint with a commit
	// reverted; Reverted then asks for it in confirmation.
	Revert bool
	Costs  Costs
	// Prior weighs the commits (nil: all alike).
	Prior []float64
	// GoodBoots are the good endpoint's boots the model was learned from
	// (the bad endpoint's come in through ObserveAt): with them the model
	// is learned again as the search's boots come in.
	GoodBoots [][]float64
	// NoCulprit is the prior of "no commit of the range is bad"
	// (default 0.01).
	NoCulprit float64
}

func (o *Options) defaults(n int) error {
	if o.Confidence == 0 {
		o.Confidence = 0.99
	}
	if !(o.Confidence > 0.5 && o.Confidence < 1) {
		return fmt.Errorf("confidence %g is not between 0.5 and 1", o.Confidence)
	}
	if o.MinSamples < 1 {
		o.MinSamples = 3
	}
	if o.MaxSamples < o.MinSamples {
		o.MaxSamples = o.MinSamples
	}
	if o.ConfirmBoots == 0 {
		o.ConfirmBoots = 2
	}
	if o.MaxBoots == 0 {
		o.MaxBoots = 6*int(math.Ceil(math.Log2(float64(n+1)))) + 20
	}
	if o.NoCulprit == 0 {
		o.NoCulprit = 0.01
	}
	if !(o.NoCulprit > 0 && o.NoCulprit < 1) {
		return fmt.Errorf("a prior of %g that no commit is bad is not a probability below 1", o.NoCulprit)
	}
	if o.Costs == (Costs{}) {
		o.Costs = Costs{Build: 600, Boot: 120, Sample: 60}
	}
	if o.Prior != nil && len(o.Prior) != n {
		return fmt.Errorf("a prior of %d weights for %d commits", len(o.Prior), n)
	}
	total := 0.0
	for i, w := range o.Prior {
		if !(w >= 0) || math.IsInf(w, 1) {
			return fmt.Errorf("commit %d has a prior weight of %g", i, w)
		}
		total += w
	}
	if o.Prior != nil && !(total > 0 && !math.IsInf(total, 1)) {
		return fmt.Errorf("the prior weights sum to %g", total)
	}
	return nil
}

// StepKind says what the search wants next, or how it ended.
type StepKind uint8

// The kinds of step.
const (
	_ StepKind = iota
	// Measure asks for one boot of Step.Commit (of the bad endpoint with
	// it reverted when Reverted), sampled while More says so.
	Measure
	// Found: Step.Commit is the first bad commit, at Step.Probability,
	// confirmed by fresh boots.
	Found
	// Inconclusive: the budget ran out, or what is left cannot be told
	// apart (skipped commits); Step.Candidates lead.
	Inconclusive
	// NotReproduced: the range most likely holds no bad commit.
	NotReproduced
)

// Step is the search's answer to "what next?".
type Step struct {
	Kind        StepKind
	Commit      int
	Reverted    bool
	Confirming  bool
	Probability float64
	Candidates  []Candidate
	Reason      string
}

// Observation is one boot the search took in: replayed in order, the
// observations rebuild the same posterior.
type Observation struct {
	Commit   int  `json:"commit"`
	Reverted bool `json:"reverted,omitempty"`
	Skipped  bool `json:"skipped,omitempty"`
	// Endpoint marks a calibration boot of the bad endpoint (ObserveAt):
	// evidence, but not a boot of the search's budget.
	Endpoint bool `json:"endpoint,omitempty"`
	// Confirming marks a boot of the leading candidate's confirmation:
	// a replay learns from it when the confirmation began.
	Confirming bool      `json:"confirming,omitempty"`
	Samples    []float64 `json:"samples,omitempty"`
	Evidence   float64   `json:"evidence"`
}

// Search is a noise-robust bisection: a posterior over which commit of
// the range is the first bad one, fed boot by boot, and the choice of the
// measurement that says the most per second.
type Search struct {
	d     *DAG
	m     Model
	opt   Options
	post  *posterior
	built []bool
	skip  []bool
	boots []int
	// reverted counts the boots of the bad endpoint with a commit
	// reverted; noRevert marks reverts the lab could not make.
	reverted map[int]int
	noRevert map[int]bool
	total    int
	gain     gainTable
	leastWhy string
	// confirmFrom is, per candidate that reached the confidence, the
	// boots each kernel of its confirmation had then.
	confirmFrom map[int]map[target]int
	log         []Observation
}

// New starts a search over the range d under the model m.
func New(d *DAG, m Model, opt Options) (*Search, error) {
	if d.Len() == 0 {
		return nil, fmt.Errorf("culprit: an empty range has no culprit")
	}
	if err := opt.defaults(d.Len()); err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	s := &Search{d: d, m: m, opt: opt, post: newPosterior(d, opt.Prior, opt.NoCulprit),
		built: make([]bool, d.Len()), skip: make([]bool, d.Len()), boots: make([]int, d.Len()),
		reverted: map[int]int{}, noRevert: map[int]bool{}, confirmFrom: map[int]map[target]int{}}
	if opt.FromOne {
		s.opt.MinSamples, s.leastWhy = leastSamples(m, opt.MinSamples, opt.MaxSamples, opt.Costs)
	}
	s.built[d.Len()-1] = true
	s.m.prepare()
	s.gain = newGainTable(s.m, s.opt.MinSamples)
	return s, nil
}

// Least is the fewest samples a boot gives, and, when the job left it to
// kbisect (Options.FromOne) and the sides lie far apart, why: a line for
// the run's log.
func (s *Search) Least() (int, string) { return s.opt.MinSamples, s.leastWhy }

// Model is the model the search judges boots by.
func (s *Search) Model() Model { return s.m }

// Boots is how many boots the search has taken in.
func (s *Search) Boots() int { return s.total }

// Log is every observation, in order.
func (s *Search) Log() []Observation { return append([]Observation(nil), s.log...) }

// Built records that a commit's kernel is built: booting it again costs
// no build.
func (s *Search) Built(commit int) { s.built[commit] = true }

// More says whether the boot whose samples these are should give another
// one: while it is unsure, below the most samples a boot may give, and
// while more samples still pin its level down better than the level
// itself scatters from boot to boot.
func (s *Search) More(samples []float64) bool {
	n := len(samples)
	switch {
	case n < s.opt.MinSamples:
		return true
	case n >= s.opt.MaxSamples:
		return false
	}
	if s.m.Spread*s.m.Spread/float64(n) < s.m.BootSpread*s.m.BootSpread/4 {
		return false
	}
	return math.Abs(s.m.Evidence(samples)) < 0.75*s.m.capOf(n)
}

// Observe takes in one boot of what step asked to measure, and returns
// what it says (log "like bad" over "like good").
func (s *Search) Observe(step Step, samples []float64) float64 {
	return s.observe(Observation{Commit: step.Commit, Reverted: step.Reverted, Confirming: step.Confirming, Samples: samples})
}

// ObserveAt takes in a boot of a commit the search did not ask for: the
// bad endpoint's calibration boots.
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
	pc, _ := s.post.probs()
	s.settle(leading(pc, 0, 1)[0])
	if o.Confirming {
		// Next began the confirmation of the candidate leading now, and
		// counts its fresh boots from here: without it, a resumed search
		// would take the boots of a confirmation under way again.
		pc, _ := s.post.probs()
		s.confirmNext(leading(pc, 0, 1)[0].Commit)
	}
	s.observe(o)
}

func (s *Search) observe(o Observation) float64 {
	switch {
	case o.Skipped && o.Reverted:
		s.noRevert[o.Commit] = true
	case o.Skipped:
		s.skip[o.Commit] = true
	default:
		o.Evidence = s.m.Evidence(o.Samples)
		if !o.Endpoint {
			s.total++
		}
		if o.Reverted {
			s.reverted[o.Commit]++
			s.post.addReverted(o.Commit, o.Evidence)
		} else {
			s.built[o.Commit] = true
			s.boots[o.Commit]++
			s.post.add(o.Commit, o.Evidence)
		}
	}
	s.log = append(s.log, o)
	if !o.Skipped && !o.Endpoint && s.total%refitEvery == 0 && len(s.opt.GoodBoots) > 0 {
		s.refit()
	}
	return s.log[len(s.log)-1].Evidence
}

// refitEvery is how often, in boots, the model is learned again.
const refitEvery = 8

// refit learns the model again from the good endpoint's boots and every
// boot whose kernel the evidence has all but decided (bad or good at
// 0.999), then weighs every boot again under it. The endpoints' few boots
// are a thin base for the boot-to-boot spread; the search's own boots
// thicken it as they come. Replayed in the same order, the log refits at
// the same boots, so a resumed search is the one it was.
func (s *Search) refit() {
	pc, _ := s.post.probs()
	q := s.d.badness(pc)
	goods := append([][]float64(nil), s.opt.GoodBoots...)
	var bads [][]float64
	for _, o := range s.log {
		if o.Skipped {
			continue
		}
		pBad := q[o.Commit]
		if o.Reverted {
			pBad = 1 - pc[o.Commit]
		}
		switch {
		case pBad >= 0.999:
			bads = append(bads, o.Samples)
		case pBad <= 0.001:
			goods = append(goods, o.Samples)
		}
	}
	// The share of samples that cross stays calibration's: the search's
	// boots took more samples when they were unsure, which is when one
	// had crossed.
	fo := FitOptions{BadBoots: s.m.BadBoots, Crossings: s.m.Crossings}
	if s.opt.MinSamples < 3 {
		// Its boots gave a second sample only when the first was unclear:
		// the spread within a boot stays calibration's too (no refit
		// changes it then).
		fo.Spread = s.m.Spread
	}
	m, err := Fit(goods, bads, fo)
	if err != nil || m.Validate() != nil {
		return
	}
	m.prepare()
	s.m = m
	s.post = newPosterior(s.d, s.opt.Prior, s.opt.NoCulprit)
	for i := range s.log {
		o := &s.log[i]
		if o.Skipped {
			continue
		}
		o.Evidence = s.m.Evidence(o.Samples)
		if o.Reverted {
			s.post.addReverted(o.Commit, o.Evidence)
		} else {
			s.post.add(o.Commit, o.Evidence)
		}
	}
	s.gain = newGainTable(s.m, s.opt.MinSamples)
}

// Probabilities are each commit's probability of being the first bad
// one, and the probability that none is.
func (s *Search) Probabilities() ([]float64, float64) { return s.post.probs() }

// Leading lists the most probable culprits until they hold the
// confidence's mass (at most k).
func (s *Search) Leading(k int) []Candidate {
	pc, _ := s.post.probs()
	return leading(pc, s.opt.Confidence, k)
}

// Badness is each commit's probability of being bad: the mass of the
// culprits among its ancestors-or-self.
func (s *Search) Badness() []float64 {
	pc, _ := s.post.probs()
	return s.d.badness(pc)
}

// BootsOf is how many boots a commit has had.
func (s *Search) BootsOf(commit int) int { return s.boots[commit] }

// SetCosts says what a build, a boot and a sample cost now that the lab
// has measured them; the next choices weigh them.
func (s *Search) SetCosts(c Costs) {
	if c.Build > 0 && c.Boot > 0 && c.Sample > 0 {
		s.opt.Costs = c
	}
}

// Next says what to measure next, or how the search ends.
func (s *Search) Next() Step {
	pc, none := s.post.probs()
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
		return Step{Kind: Inconclusive, Probability: lead.Probability, Candidates: leading(pc, conf, 10), Reason: reason}
	}
	if lead.Probability >= conf {
		if t, ok := s.confirmNext(lead.Commit); ok {
			if t.reverted || !s.skip[t.commit] {
				return Step{Kind: Measure, Commit: t.commit, Reverted: t.reverted, Confirming: true, Probability: lead.Probability}
			}
		} else {
			by := "it and its parents"
			if s.opt.Revert && lead.Commit != s.d.Len()-1 && !s.noRevert[lead.Commit] {
				by = "it, its parents and the bad endpoint without it"
			}
			return Step{Kind: Found, Commit: lead.Commit, Probability: lead.Probability, Candidates: leading(pc, conf, 5),
				Reason: fmt.Sprintf("probability %s after %d boots, confirmed by fresh boots of %s", Format(lead.Probability), s.total, by)}
		}
	}
	x, g := s.choose(pc)
	if x < 0 || g < 1e-3 {
		return Step{Kind: Inconclusive, Probability: lead.Probability, Candidates: leading(pc, conf, 10),
			Reason: "no commit that can be measured tells the leading candidates apart (they are skipped, or next to skipped commits)"}
	}
	return Step{Kind: Measure, Commit: x, Probability: lead.Probability}
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
