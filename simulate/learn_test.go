package simulate

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"kbisect/internal/simnoise"
	"kbisect/noise"
)

// drawBoots draws n boots of k samples around level from the model.
func drawBoots(rng *rand.Rand, m simnoise.Model, level, other float64, n, k int) [][]float64 {
	var out [][]float64
	for range n {
		b := m.NewBoot(rng, level, other)
		boot := make([]float64, k)
		for i := range boot {
			boot[i] = b.Sample()
		}
		out = append(out, boot)
	}
	return out
}

// near reports whether got is within a factor of tol of want.
func near(got, want, tol float64) bool { return math.Abs(math.Log(got/want)) <= math.Log(tol) }

// Twenty boots of ten samples each side, drawn at 10 and 20 µs with a
// spread of 0.2 and a boot spread of 0.15, come back as drawn: over 500
// seeds, 99 % of the fits fall within these bounds.
func TestLearnRecoversTheNoiseTheBootsWereDrawnFrom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	m := simnoise.Model{Spread: 0.2, BootSpread: 0.15}
	good, bad := drawBoots(rng, m, 10000, 20000, 20, 10), drawBoots(rng, m, 20000, 10000, 20, 10)
	l, err := Learn(good, bad, noise.KindTime, true)
	if err != nil {
		t.Fatal(err)
	}
	if !near(l.Good, 10000, 1.15) || !near(l.Bad, 20000, 1.15) || l.Kind != noise.KindTime || l.GoodBoots != 20 || l.BadBoots != 20 {
		t.Errorf("levels %g and %g %s from %d and %d boots; want 10,000 and 20,000 ns from 20 and 20", l.Good, l.Bad, l.Kind, l.GoodBoots, l.BadBoots)
	}
	if l.Spread < 0.14 || l.Spread > 0.26 || !l.BootSpreadLearned || l.BootSpread < 0.06 || l.BootSpread > 0.32 {
		t.Errorf("spread %.3f (drawn 0.2), boot spread %.3f learned %v (drawn 0.15)", l.Spread, l.BootSpread, l.BootSpreadLearned)
	}
}

// Availability is worse when lower: the levels are badness, 100 − the
// percentage, and their kind a number.
func TestLearnTurnsALowerIsBadMetricIntoBadness(t *testing.T) {
	good := [][]float64{{99.90, 99.91, 99.89}, {99.90, 99.92, 99.90}}
	bad := [][]float64{{99.00, 99.02, 98.98}, {99.01, 99.00, 98.99}}
	l, err := Learn(good, bad, noise.KindPercent, false)
	if err != nil {
		t.Fatal(err)
	}
	if !near(l.Good, 0.1, 1.05) || !near(l.Bad, 1.0, 1.05) || l.Kind != noise.KindNumber {
		t.Errorf("levels %g and %g (%s); want badness 0.1 and 1 (number)", l.Good, l.Bad, l.Kind)
	}
	// A throughput's badness is its inverse, however small.
	l, err = Learn([][]float64{{20000, 20400, 19600}}, [][]float64{{10000, 10200, 9800}}, noise.KindNumber, false)
	if err != nil || !near(l.Good, 1/20000.0, 1.01) || !near(l.Bad, 1/10000.0, 1.01) {
		t.Errorf("a throughput of 20,000 and 10,000: %+v, %v", l, err)
	}
}

// One boot of a kernel says nothing of how boots differ: the boot spread
// is left to the flags.
func TestLearnLeavesTheBootSpreadOfOneBootUnknown(t *testing.T) {
	l, err := Learn([][]float64{{10, 11, 9}, {10, 10, 11}}, [][]float64{{20, 21, 19}}, noise.KindNumber, true)
	if err != nil {
		t.Fatal(err)
	}
	if l.BootSpreadLearned || l.BootSpread != 0 || !near(l.Good, 10, 1.001) || !near(l.Bad, 20, 1.001) {
		t.Errorf("%+v", l)
	}
}

func TestLearnSaysWhyTheBootsGiveNoModel(t *testing.T) {
	same := [][]float64{{10000, 10100, 9900}, {10050, 9950, 10000}}
	for want, sides := range map[string][2][][]float64{
		"the two kernels do not differ: the bad one measures 10 µs, the good one 10 µs (the medians of their boots' medians), and higher is worse": {same, same},
		"the bad one measures 5 µs, the good one 10 µs": {same, {{5000, 5000, 5000}}},
		"no samples of the good kernel":                 {{{}}, same},
		"no samples of the bad kernel":                  {same, nil},
	} {
		_, err := Learn(sides[0], sides[1], noise.KindTime, true)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v; want %q", err, want)
		}
	}
}
