package simulate

import (
	"errors"
	"fmt"
	"math"

	"kbisect/culprit"
	"kbisect/noise"
)

// Learned is a machine's noise learned from real boots of a good and a
// bad kernel: what a simulation takes where its flags say nothing.
type Learned struct {
	// Good and Bad are the kernels' levels, the medians of their boots'
	// medians: in the metric's unit when higher is worse (ns for a time),
	// else as badness (the inverse, or 100 − a percentage).
	Good, Bad float64
	// Kind is the levels' kind: noise.KindTime for a time where higher is
	// worse, noise.KindNumber for everything else.
	Kind string
	// Spread is the log-normal spread of samples within a boot.
	Spread float64
	// BootSpread is the spread of a boot's level from boot to boot, known
	// (BootSpreadLearned) only from two boots or more of each kernel.
	BootSpread        float64
	BootSpreadLearned bool
	// GoodBoots and BadBoots are the boots it rests on.
	GoodBoots, BadBoots int
}

// Learn fits the noise to boots of a good and a bad kernel, as a run's
// calibration fits its endpoints (culprit.Fit on the samples' badness):
// each boot is its samples' values of one metric, of the kind
// (noise.KindTime, …) and direction given. Boots without samples are left
// out.
func Learn(good, bad [][]float64, kind string, higherIsBad bool) (*Learned, error) {
	rule := noise.Rule{MetricKind: kind, HigherIsBad: higherIsBad}
	badness := func(boots [][]float64) (out [][]float64, medians []float64) {
		for _, boot := range boots {
			if len(boot) == 0 {
				continue
			}
			b := make([]float64, len(boot))
			for i, x := range boot {
				b[i] = rule.BadnessOf(x) // as the search weighs it
			}
			out, medians = append(out, b), append(medians, noise.Median(boot))
		}
		return out, medians
	}
	g, gm := badness(good)
	b, bm := badness(bad)
	switch {
	case len(g) == 0:
		return nil, errors.New("no samples of the good kernel")
	case len(b) == 0:
		return nil, errors.New("no samples of the bad kernel")
	}
	// The levels are the medians of the boots' medians, as a simulation
	// draws them: what the fit makes of boots that split between levels
	// (an intermittent regression) the simulation has flags for.
	lgood, lbad := math.Log(medianBadness(g)), math.Log(medianBadness(b))
	if !(lbad > lgood) {
		worse := "higher"
		if !higherIsBad {
			worse = "lower"
		}
		return nil, fmt.Errorf("the two kernels do not differ: the bad one measures %s, the good one %s (the medians of their boots' medians), and %s is worse",
			noise.FormatValue(kind, noise.Median(bm)), noise.FormatValue(kind, noise.Median(gm)), worse)
	}
	m, err := culprit.Fit(g, b, culprit.FitOptions{})
	if err != nil {
		return nil, err
	}
	m.Good, m.Bad = lgood, lbad
	l := &Learned{Good: math.Exp(m.Good), Bad: math.Exp(m.Bad), Kind: noise.KindNumber, Spread: m.Spread, GoodBoots: len(g), BadBoots: len(b)}
	if kind == noise.KindTime && higherIsBad {
		l.Kind = noise.KindTime
	}
	// From one boot of a side, Fit's boot spread is its floor, not a
	// measurement.
	if len(g) >= 2 && len(b) >= 2 {
		l.BootSpread, l.BootSpreadLearned = m.BootSpread, true
	}
	return l, nil
}

// medianBadness is the median of the boots' median badness, on the log
// scale as the model sees them.
func medianBadness(boots [][]float64) float64 {
	meds := make([]float64, len(boots))
	for i, b := range boots {
		logs := make([]float64, len(b))
		for k, x := range b {
			logs[k] = math.Log(x)
		}
		meds[i] = noise.Median(logs)
	}
	return math.Exp(noise.Median(meds))
}
