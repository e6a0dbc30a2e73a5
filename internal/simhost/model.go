package simhost

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"kbisect/internal/simnoise"
)

// NoiseModel is the noise real machines have, for a host to measure
// with: a boot-to-boot level, boots that land on the other side, a spread
// within a boot, spikes and flipped samples (simnoise.Model). The zero
// NoiseModel is the host's own model of osnoise.go, unchanged.
type NoiseModel struct {
	// Model is how a measurement's level scatters around the booted
	// kernel's. Each boot draws a simnoise.Boot at the kernel's level;
	// each osnoise measurement takes one sample of it as its level, and
	// that level alone (no spread of the host's own) makes the trace. A
	// measurement storms when the side it is from does (a kernel at the
	// side's level would): a good kernel's bad boot storms, a quiet
	// kernel's spike does not.
	Model simnoise.Model
	// Good and Bad are the levels of the two sides, for the boots and
	// samples the model puts on the other side: a kernel below their
	// geometric mean is on the good side and its other side is Bad; any
	// other kernel's is Good. Both 0: a kernel's other side is its own
	// level (bad boots and flips change nothing).
	Good, Bad time.Duration
	// Exact makes each measurement's trace carry the drawn level itself,
	// to the µs the tracer prints, as every period's noise and longest
	// single noise on every CPU: what a job's metric reads is the draw.
	// A simulation that draws as the host does (simulate.Trace) then
	// measures what a run on the host measures.
	Exact bool
}

// bootStream numbers the generators of the boots' draws apart from the
// measurements' (the host's seed and the measurement's number).
const bootStream = 1 << 63

// modelled reports whether the host draws from a model.
func (n NoiseModel) modelled() bool { return n.Model != (simnoise.Model{}) }

// Validate says what in the model cannot be.
func (n NoiseModel) Validate() error {
	if err := n.Model.Validate(); err != nil {
		return fmt.Errorf("simhost: noise model: %v", err)
	}
	if (n.Good != 0 || n.Bad != 0) && !(n.Good > 0 && n.Bad > n.Good) {
		return fmt.Errorf("simhost: noise levels good %v, bad %v: give both, the good one lower", n.Good, n.Bad)
	}
	return nil
}

// other is the other side's level for a kernel at level.
func (n NoiseModel) other(level time.Duration) time.Duration {
	switch {
	case n.Good == 0:
		return level
	case float64(level)*float64(level) < float64(n.Good)*float64(n.Bad):
		return n.Bad
	}
	return n.Good
}

// SetNoiseModel gives the host the noise real machines have (the zero
// NoiseModel: its own model, as before). It applies from the running
// boot's next measurement on.
func (h *Host) SetNoiseModel(n NoiseModel) error {
	if err := n.Validate(); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.noise, h.noiseBoot, h.noiseRun = n, nil, n.Model.NewRun()
	return nil
}

// NoiseModel returns the noise the host measures with.
func (h *Host) NoiseModel() NoiseModel {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.noise
}

// drawLevel draws the level of one measurement of the running boot of a
// kernel at level, in µs, and the level of the side it is from: the
// kernel's, or the other side's for a bad boot or a flip (both: the
// kernel's). The boot's own draw is made at its first measurement. h.mu
// is held.
func (h *Host) drawLevel(level time.Duration) (us float64, side time.Duration) {
	if h.noiseBoot == nil || h.noiseBootID != h.bootID {
		h.noiseBoots++
		rng := rand.New(rand.NewPCG(h.seed, bootStream+uint64(h.noiseBoots)))
		if h.noiseRun == nil {
			h.noiseRun = h.noise.Model.NewRun()
		}
		other := h.noise.other(level)
		// A kernel above the sides' geometric mean is a bad one: its
		// boots may not show the regression, and its spikes may differ.
		h.noiseBoot = h.noiseRun.Boot(rng, micros(level), micros(other), h.noise.Good != 0 && other < level)
		h.noiseBootID = h.bootID
	}
	us, flipped := h.noiseBoot.Draw()
	if h.noiseBoot.OtherSide != flipped {
		return us, h.noise.other(level)
	}
	return us, level
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// measurementLevel is the host's own model: a measurement's level around
// the kernel's, log-normal, ~20 % for a quiet kernel and ~4 % for a
// storm; from stormFrom (StormLevel, unless the host never storms) up the
// CPUs storm.
func measurementLevel(rng *rand.Rand, level, stormFrom time.Duration) (us float64, storm bool) {
	storm = level >= stormFrom
	spread := 0.2
	if storm {
		spread = 0.04
	}
	return micros(level) * math.Exp(spread*rng.NormFloat64()), storm
}
