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
	// plus 20, stretched by how little a boot tells on this model
	// (Budget).
	MaxBoots int
	// MinSamples and MaxSamples bound the samples of one boot.
	MinSamples, MaxSamples int
	// FromOne lets a boot start with one sample where the model finds one
	// decisive (the job left the minimum to kbisect): MinSamples is then
	// the minimum elsewhere.
	FromOne bool
	// ConfirmBoots is how many fresh boots each of the candidate, its
	// parents and the bad endpoint without it get once the candidate
	// reaches the confidence (default 2); the endpoints get one each.
	ConfirmBoots int
	// ControlEvery is how many boots may pass without one of the good
	// endpoint, which anchors the machine's drift (default 12; a machine
	// found to drift gets one every third of that; negative: none).
	ControlEvery int
	// Revert says the lab can build the bad endpoint with a commit
	// reverted; Reverted then asks for it in confirmation.
	Revert bool
	Costs  Costs
	// Prior weighs the commits (nil: all alike).
	Prior []float64
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
	if o.ControlEvery == 0 {
		o.ControlEvery = 12
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

// Budget is the boots a search of n commits may take: 6 per step git
// would take, plus 20, for boots that tell as much as a clean boot of a
// level regression (0.5 bits about a commit as likely bad as good);
// more where a boot tells less (an intermittent regression, one in how
// often it spikes), up to four times that.
func Budget(n int, g gainTable) int {
	base := 6*int(math.Ceil(math.Log2(float64(n+1)))) + 20
	stretch := 1.0
	if bits := g.at(0.5); bits > 0 {
		stretch = clamp(0.5/bits, 1, 4)
	}
	return int(math.Ceil(float64(base) * stretch))
}
