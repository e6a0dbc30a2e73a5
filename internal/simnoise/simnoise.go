// Package simnoise is the noise real RT machines show, as a model to draw
// samples from: a boot-to-boot level, boots that land on the other side,
// a spread within a boot, spikes and flipped samples. The simulated host
// and `kbisect simulate` draw from the same model, so what the demo shows
// and what the simulation predicts agree.
package simnoise

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Model is how samples scatter around a kernel's level. Spreads are
// log-normal sigmas: noise is positive, skewed and multiplicative.
type Model struct {
	// Spread is the sample-to-sample spread within one boot.
	Spread float64
	// BootSpread is the boot-to-boot spread of the level: IRQ and timer
	// placement, SMIs, cache and memory layout differ per boot.
	BootSpread float64
	// BadBoots is the share of boots whose level is the other side's: a
	// good kernel's boot that measures like a bad one, or the reverse.
	BadBoots float64
	// Strays is the share of boots whose level lands partway to the other
	// side's, between StrayMin and StrayMax of the way (on a log scale): a
	// real guest's boots are bimodal more often than they are normal.
	Strays             float64
	StrayMin, StrayMax float64
	// Spikes is the share of samples multiplied by a factor between
	// SpikeMin and SpikeMax (log-uniform): an SMI, a firmware hiccup.
	Spikes             float64
	SpikeMin, SpikeMax float64
	// Flips is the share of samples drawn from the other side's level.
	Flips float64
}

// Validate says what in the model cannot be.
func (m Model) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
		max  float64
	}{{"spread", m.Spread, 5}, {"boot-spread", m.BootSpread, 5}, {"bad-boots", m.BadBoots, 0.5}, {"stray-boots", m.Strays, 0.5}, {"spikes", m.Spikes, 0.5}, {"flips", m.Flips, 0.5}} {
		if !(f.v >= 0 && f.v <= f.max) {
			return fmt.Errorf("%s %g is not between 0 and %g", f.name, f.v, f.max)
		}
	}
	if m.Spikes > 0 && !(m.SpikeMin >= 1 && m.SpikeMax >= m.SpikeMin && !math.IsInf(m.SpikeMax, 0)) {
		return fmt.Errorf("spike size %g-%gx: give factors of at least 1, the smaller first", m.SpikeMin, m.SpikeMax)
	}
	if m.Strays > 0 && !(m.StrayMin >= 0 && m.StrayMax >= m.StrayMin && m.StrayMax <= 1) {
		return fmt.Errorf("stray boots %g-%g%% of the way: give shares of the way between 0 and 100%%, the smaller first", 100*m.StrayMin, 100*m.StrayMax)
	}
	return nil
}

// Boot is one boot of a kernel: the level its samples scatter around.
type Boot struct {
	m           Model
	level       float64 // this boot's median
	other       float64 // the other side's level on this boot, for flips
	rng         *rand.Rand
	OtherSide   bool // the boot landed on the other side's level
	sampleCount int
}

// NewBoot boots a kernel whose samples have median level; other is the
// other side's (a bad kernel's for a good one, and the reverse).
func (m Model) NewBoot(rng *rand.Rand, level, other float64) *Boot {
	b := &Boot{m: m, rng: rng}
	if m.BadBoots > 0 && rng.Float64() < m.BadBoots {
		level, other = other, level
		b.OtherSide = true
	}
	if m.Strays > 0 && rng.Float64() < m.Strays {
		f := m.StrayMin + (m.StrayMax-m.StrayMin)*rng.Float64()
		level *= math.Pow(other/level, f)
	}
	shift := 1.0
	if m.BootSpread > 0 {
		shift = math.Exp(m.BootSpread * rng.NormFloat64())
	}
	b.level, b.other = level*shift, other*shift
	return b
}

// Sample draws one sample of the boot.
func (b *Boot) Sample() float64 {
	x, _ := b.Draw()
	return x
}

// Draw draws one sample of the boot, as Sample does, and says whether it
// is a flip: drawn from the other side's level. A simulated host storms
// or not by the side a sample is from, not by its size.
func (b *Boot) Draw() (x float64, flipped bool) {
	b.sampleCount++
	level := b.level
	if b.m.Flips > 0 && b.rng.Float64() < b.m.Flips {
		level, flipped = b.other, true
	}
	x = level
	if b.m.Spread > 0 {
		x *= math.Exp(b.m.Spread * b.rng.NormFloat64())
	}
	if b.m.Spikes > 0 && b.rng.Float64() < b.m.Spikes {
		lo, hi := math.Log(b.m.SpikeMin), math.Log(b.m.SpikeMax)
		x *= math.Exp(lo + (hi-lo)*b.rng.Float64())
	}
	return x, flipped
}

// Samples is how many samples the boot gave.
func (b *Boot) Samples() int { return b.sampleCount }

// ParsePercent reads a share written "5%" or "0.05".
func ParsePercent(s string) (float64, error) {
	t := strings.TrimSpace(s)
	scale := 1.0
	if strings.HasSuffix(t, "%") {
		t, scale = strings.TrimSuffix(t, "%"), 0.01
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || v < 0 {
		return 0, fmt.Errorf("%q is not a share: write 5%% or 0.05", s)
	}
	return v * scale, nil
}

// ParseSpikes reads spikes written "5%:2-20x": the share of samples, and
// the range of the factor they are multiplied by. "0" or "0%" is none.
func ParseSpikes(s string) (rate, lo, hi float64, err error) {
	share, size, found := strings.Cut(s, ":")
	if rate, err = ParsePercent(share); err != nil {
		return 0, 0, 0, err
	}
	if !found {
		if rate == 0 {
			return 0, 0, 0, nil
		}
		return 0, 0, 0, fmt.Errorf("%q: say how large the spikes are, as in 5%%:2-20x", s)
	}
	a, b, ok := strings.Cut(strings.TrimSuffix(strings.TrimSpace(size), "x"), "-")
	if !ok {
		b = a
	}
	lo, err1 := strconv.ParseFloat(strings.TrimSpace(a), 64)
	hi, err2 := strconv.ParseFloat(strings.TrimSpace(b), 64)
	if err1 != nil || err2 != nil || !(lo >= 1) || !(hi >= lo) || math.IsInf(hi, 0) {
		return 0, 0, 0, fmt.Errorf("%q: spike sizes are factors of at least 1, the smaller first, as in 5%%:2-20x", s)
	}
	return rate, lo, hi, nil
}

// ParseStrays reads stray boots written "25%:20-60%": the share of boots,
// and how far toward the other side's level they land (a share of the way
// on a log scale). "0" or "0%" is none.
func ParseStrays(s string) (rate, lo, hi float64, err error) {
	share, way, found := strings.Cut(s, ":")
	if rate, err = ParsePercent(share); err != nil {
		return 0, 0, 0, err
	}
	if !found {
		if rate == 0 {
			return 0, 0, 0, nil
		}
		return 0, 0, 0, fmt.Errorf("%q: say how far toward the other side they land, as in 25%%:20-60%%", s)
	}
	a, b, ok := strings.Cut(strings.TrimSpace(way), "-")
	if !ok {
		b = a
	}
	if a, b = strings.TrimSpace(a), strings.TrimSpace(b); strings.HasSuffix(b, "%") && !strings.HasSuffix(a, "%") {
		a += "%" // 20-60% is 20% to 60%
	}
	lo, err1 := ParsePercent(a)
	hi, err2 := ParsePercent(b)
	if err1 != nil || err2 != nil || !(hi >= lo) || hi > 1 {
		return 0, 0, 0, fmt.Errorf("%q: how far is a share of the way between 0 and 100%%, the smaller first, as in 25%%:20-60%%", s)
	}
	return rate, lo, hi, nil
}

// Parse reads a model written as comma-separated settings, as `kbisect
// demo --noise` takes it: "spread=0.2,boot-spread=0.25,bad-boots=5%,
// spikes=5%:2-20x,flips=0%". Settings left out are 0.
func Parse(s string) (Model, error) {
	var m Model
	if strings.TrimSpace(s) == "" {
		return m, nil
	}
	for _, part := range strings.Split(s, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return m, fmt.Errorf("%q: write setting=value, as in spread=0.2", part)
		}
		var err error
		switch strings.TrimSpace(key) {
		case "spread":
			m.Spread, err = strconv.ParseFloat(val, 64)
		case "boot-spread":
			m.BootSpread, err = strconv.ParseFloat(val, 64)
		case "bad-boots":
			m.BadBoots, err = ParsePercent(val)
		case "flips":
			m.Flips, err = ParsePercent(val)
		case "spikes":
			m.Spikes, m.SpikeMin, m.SpikeMax, err = ParseSpikes(val)
		case "stray-boots":
			m.Strays, m.StrayMin, m.StrayMax, err = ParseStrays(val)
		default:
			return m, fmt.Errorf("%q: no such setting; the settings are spread, boot-spread, bad-boots, stray-boots, spikes and flips", key)
		}
		if err != nil {
			return m, fmt.Errorf("%s: %v", key, err)
		}
	}
	return m, m.Validate()
}

// String writes the model as Parse reads it.
func (m Model) String() string {
	s := fmt.Sprintf("spread=%g,boot-spread=%g,bad-boots=%g%%,flips=%g%%", m.Spread, m.BootSpread, 100*m.BadBoots, 100*m.Flips)
	if m.Spikes > 0 {
		s += fmt.Sprintf(",spikes=%g%%:%g-%gx", 100*m.Spikes, m.SpikeMin, m.SpikeMax)
	}
	if m.Strays > 0 {
		s += fmt.Sprintf(",stray-boots=%g%%:%g-%g%%", 100*m.Strays, 100*m.StrayMin, 100*m.StrayMax)
	}
	return s
}
