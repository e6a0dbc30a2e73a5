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
	// Drift makes the machine drift over a run: the level of its boot k
	// (0 the run's first, calibration included) is multiplied by 1 +
	// Drift·k/DriftBoots, and from DriftBoots on by 1 + Drift when
	// DriftFlat (thermal and firmware drift over a night).
	Drift      float64
	DriftBoots int
	DriftFlat  bool
	// AR makes the boots' levels an AR(1) over the run's boots in order,
	// with coefficient AR and BootSpread their stationary spread: boots
	// close in time land close (0: each boot on its own).
	AR float64
	// Intermittent is the share of a bad kernel's boots that show the
	// regression (a race that shows on some boots only): the others
	// measure as a good kernel's. 0: every one does.
	Intermittent float64
	// SpikesBad, when HasSpikesBad, is the bad kernel's share of spikes
	// (Spikes is then the good kernel's, both of the same sizes): a
	// regression in how often it spikes.
	SpikesBad    float64
	HasSpikesBad bool
	// SampleNu and BootNu, when set, draw the samples' deviations within
	// a boot and the boots' levels from a Student-t with that many
	// degrees of freedom (Spread and BootSpread its scale) instead of a
	// normal: heavier tails than the model assumes (2: no variance).
	SampleNu, BootNu float64
	// SpikeTail, when set, draws a spike's factor from a Pareto of that
	// index starting at SpikeMin and cut at SpikeMax, instead of
	// log-uniform between them: most spikes small, a few huge.
	SpikeTail float64
	// GoodMode is the share of a good kernel's boots whose level is
	// GoodModeAt times its own: a good kernel whose boots are bimodal.
	GoodMode, GoodModeAt float64
}

// Validate says what in the model cannot be.
func (m Model) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
		max  float64
	}{{"spread", m.Spread, 5}, {"boot-spread", m.BootSpread, 5}, {"bad-boots", m.BadBoots, 0.5}, {"stray-boots", m.Strays, 0.5}, {"spikes", m.Spikes, 0.5}, {"flips", m.Flips, 0.5},
		{"drift", math.Abs(m.Drift), 10}, {"intermittent", m.Intermittent, 1}, {"spikes-bad", m.SpikesBad, 1}} {
		if !(f.v >= 0 && f.v <= f.max) {
			return fmt.Errorf("%s %g is not between 0 and %g", f.name, f.v, f.max)
		}
	}
	spiky := m.Spikes > 0 || (m.HasSpikesBad && m.SpikesBad > 0)
	if spiky && !(m.SpikeMin >= 1 && m.SpikeMax >= m.SpikeMin && !math.IsInf(m.SpikeMax, 0)) {
		return fmt.Errorf("spike size %g-%gx: give factors of at least 1, the smaller first", m.SpikeMin, m.SpikeMax)
	}
	if m.Strays > 0 && !(m.StrayMin >= 0 && m.StrayMax >= m.StrayMin && m.StrayMax <= 1) {
		return fmt.Errorf("stray boots %g-%g%% of the way: give shares of the way between 0 and 100%%, the smaller first", 100*m.StrayMin, 100*m.StrayMax)
	}
	if m.Drift != 0 && m.DriftBoots < 1 {
		return fmt.Errorf("drift %g%% over %d boots: give the boots it takes, at least 1", 100*m.Drift, m.DriftBoots)
	}
	if m.Drift <= -1 {
		return fmt.Errorf("drift %g%%: a level cannot shrink by all of itself", 100*m.Drift)
	}
	if !(m.AR >= 0 && m.AR < 1) {
		return fmt.Errorf("boot-ar %g is not between 0 and 1 (1 excluded)", m.AR)
	}
	for _, f := range []struct {
		name string
		nu   float64
	}{{"sample-t", m.SampleNu}, {"boot-t", m.BootNu}} {
		if f.nu != 0 && !(f.nu >= 1 && f.nu <= 1000) {
			return fmt.Errorf("%s %g: give the Student-t's degrees of freedom, between 1 and 1000 (2: heavy tails without a variance)", f.name, f.nu)
		}
	}
	if m.SpikeTail != 0 && !(m.SpikeTail >= 0.1 && m.SpikeTail <= 100) {
		return fmt.Errorf("spike-tail %g: give the Pareto's index, between 0.1 and 100 (1: a few spikes near the largest)", m.SpikeTail)
	}
	if !(m.GoodMode >= 0 && m.GoodMode <= 1) || (m.GoodMode > 0 && !(m.GoodModeAt > 0 && !math.IsInf(m.GoodModeAt, 0))) {
		return fmt.Errorf("good-mode %g%% at %gx: give the share of a good kernel's boots and their factor, as in 30%%:1.6x", 100*m.GoodMode, m.GoodModeAt)
	}
	return nil
}

// Run is one machine over one run: its boots in the order they come, for
// what depends on it (drift, the AR(1) of boot levels).
type Run struct {
	m     Model
	boots int
	ar    float64 // the last boot's log shift, for AR
}

// NewRun starts a run on a machine with this noise.
func (m Model) NewRun() *Run { return &Run{m: m} }

// Boots is how many boots the run has drawn.
func (r *Run) Boots() int { return r.boots }

// Boot is one boot of a kernel: the level its samples scatter around.
type Boot struct {
	m           Model
	level       float64 // this boot's median
	other       float64 // the other side's level on this boot, for flips
	spikes      float64 // this boot's share of spikes
	rng         *rand.Rand
	OtherSide   bool // the boot landed on the other side's level
	sampleCount int
}

// NewBoot boots a kernel whose samples have median level, on a run of
// its own (no drift, no AR); other is the other side's (a bad kernel's
// for a good one, and the reverse), and the kernel is taken as a good one.
func (m Model) NewBoot(rng *rand.Rand, level, other float64) *Boot {
	return m.NewRun().Boot(rng, level, other, false)
}

// Boot boots the run's next kernel: one whose samples have median level,
// other the other side's level; bad says the kernel is a bad one (its
// boots may not show the regression, and its spikes may differ).
func (r *Run) Boot(rng *rand.Rand, level, other float64, bad bool) *Boot {
	m := r.m
	k := r.boots
	r.boots++
	spikes := m.Spikes
	b := &Boot{m: m, rng: rng}
	if bad && m.Intermittent > 0 && rng.Float64() >= m.Intermittent {
		// This boot does not show the regression: it measures as a
		// good kernel's.
		level, other = other, level
		b.OtherSide = true
	}
	if m.BadBoots > 0 && rng.Float64() < m.BadBoots {
		level, other = other, level
		b.OtherSide = !b.OtherSide
	}
	if !bad && m.GoodMode > 0 && rng.Float64() < m.GoodMode {
		level *= m.GoodModeAt
	}
	if m.Strays > 0 && rng.Float64() < m.Strays {
		f := m.StrayMin + (m.StrayMax-m.StrayMin)*rng.Float64()
		level *= math.Pow(other/level, f)
	}
	shift := 1.0
	if m.BootSpread > 0 {
		z := m.BootSpread * deviate(rng, m.BootNu)
		if m.AR > 0 {
			if k > 0 {
				z = m.AR*r.ar + math.Sqrt(1-m.AR*m.AR)*z
			}
			r.ar = z
		}
		shift = math.Exp(z)
	}
	if m.HasSpikesBad && bad != b.OtherSide {
		spikes = m.SpikesBad
	}
	if m.Drift != 0 {
		at := float64(k)
		if m.DriftFlat {
			at = math.Min(at, float64(m.DriftBoots))
		}
		shift *= 1 + m.Drift*at/float64(m.DriftBoots)
	}
	b.level, b.other, b.spikes = level*shift, other*shift, spikes
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
		x *= math.Exp(b.m.Spread * deviate(b.rng, b.m.SampleNu))
	}
	if b.spikes > 0 && b.rng.Float64() < b.spikes {
		x *= b.m.spike(b.rng)
	}
	return x, flipped
}

// spike draws a spike's factor: log-uniform between SpikeMin and
// SpikeMax, or with SpikeTail a Pareto from SpikeMin cut at SpikeMax (by
// its inverse distribution function, the cut one).
func (m Model) spike(rng *rand.Rand) float64 {
	lo, hi := m.SpikeMin, m.SpikeMax
	if m.SpikeTail == 0 || hi <= lo {
		return math.Exp(math.Log(lo) + (math.Log(hi)-math.Log(lo))*rng.Float64())
	}
	cut := 1 - math.Pow(lo/hi, m.SpikeTail)
	return lo * math.Pow(1-cut*rng.Float64(), -1/m.SpikeTail)
}

// deviate draws a standard deviate: a normal, or with nu > 0 a Student-t
// of nu degrees of freedom (a normal over the root of a χ² of nu degrees
// divided by nu; a χ² of nu degrees is twice a gamma of shape nu/2).
func deviate(rng *rand.Rand, nu float64) float64 {
	z := rng.NormFloat64()
	if nu == 0 {
		return z
	}
	return z / math.Sqrt(2*gamma(rng, nu/2)/nu)
}

// gamma draws from a gamma distribution of this shape and scale 1
// (Marsaglia and Tsang's squeeze; a shape below 1 from one above it,
// times a uniform to the power of 1/shape).
func gamma(rng *rand.Rand, shape float64) float64 {
	if shape < 1 {
		return gamma(rng, shape+1) * math.Pow(1-rng.Float64(), 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := 1 - rng.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
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

// ParseMode reads a second mode of a good kernel's boots written
// "30%:1.6x": the share of its boots, and the factor on their level.
// "0" or "0%" is none.
func ParseMode(s string) (share, at float64, err error) {
	p, f, found := strings.Cut(s, ":")
	if share, err = ParsePercent(p); err != nil {
		return 0, 0, fmt.Errorf("%q: write the share of a good kernel's boots and their factor, as in 30%%:1.6x", s)
	}
	if !found {
		if share == 0 {
			return 0, 0, nil
		}
		return 0, 0, fmt.Errorf("%q: say the factor on those boots' level, as in 30%%:1.6x", s)
	}
	at, err = strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(f), "x"), 64)
	if err != nil || !(at > 0) || math.IsInf(at, 0) || share > 1 {
		return 0, 0, fmt.Errorf("%q: write the share of a good kernel's boots (at most 100%%) and a factor above 0, as in 30%%:1.6x", s)
	}
	return share, at, nil
}

// ParseDrift reads a drift written "60%:40": the level grows by 60 % over
// the run's first 40 boots, and on at that pace; "60%:40:flat" stops it
// there. "0" or "0%" is none.
func ParseDrift(s string) (share float64, boots int, flat bool, err error) {
	parts := strings.Split(s, ":")
	t := strings.TrimSpace(parts[0])
	neg := strings.HasPrefix(t, "-")
	if share, err = ParsePercent(strings.TrimPrefix(t, "-")); err != nil {
		return 0, 0, false, fmt.Errorf("%q: write the growth and the boots it takes, as in 60%%:40 (60%%:40:flat to stop there)", s)
	}
	if neg {
		share = -share
	}
	if len(parts) == 1 && share == 0 {
		return 0, 0, false, nil
	}
	bad := func() (float64, int, bool, error) {
		return 0, 0, false, fmt.Errorf("%q: write the growth and the boots it takes, as in 60%%:40 (60%%:40:flat to stop there)", s)
	}
	if len(parts) < 2 || len(parts) > 3 {
		return bad()
	}
	if boots, err = strconv.Atoi(strings.TrimSpace(parts[1])); err != nil || boots < 1 {
		return bad()
	}
	if len(parts) == 3 {
		if strings.TrimSpace(parts[2]) != "flat" {
			return bad()
		}
		flat = true
	}
	return share, boots, flat, nil
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
		case "drift":
			m.Drift, m.DriftBoots, m.DriftFlat, err = ParseDrift(val)
		case "boot-ar":
			m.AR, err = strconv.ParseFloat(val, 64)
		case "intermittent":
			m.Intermittent, err = ParsePercent(val)
		case "spikes-bad":
			m.SpikesBad, err = ParsePercent(val)
			m.HasSpikesBad = true
		case "sample-t":
			m.SampleNu, err = strconv.ParseFloat(val, 64)
		case "boot-t":
			m.BootNu, err = strconv.ParseFloat(val, 64)
		case "spike-tail":
			m.SpikeTail, err = strconv.ParseFloat(val, 64)
		case "good-mode":
			m.GoodMode, m.GoodModeAt, err = ParseMode(val)
		default:
			return m, fmt.Errorf("%q: no such setting; the settings are %s", key, settings)
		}
		if err != nil {
			return m, fmt.Errorf("%s: %v", key, err)
		}
	}
	return m, m.Validate()
}

// settings are the names Parse knows, for its error.
const settings = "spread, boot-spread, bad-boots, stray-boots, spikes, flips, drift, boot-ar, intermittent, spikes-bad, sample-t, boot-t, spike-tail and good-mode"

// String writes the model as Parse reads it.
func (m Model) String() string {
	s := fmt.Sprintf("spread=%g,boot-spread=%g,bad-boots=%g%%,flips=%g%%", m.Spread, m.BootSpread, 100*m.BadBoots, 100*m.Flips)
	if m.Spikes > 0 || m.HasSpikesBad {
		s += fmt.Sprintf(",spikes=%g%%:%g-%gx", 100*m.Spikes, m.SpikeMin, m.SpikeMax)
	}
	if m.HasSpikesBad {
		s += fmt.Sprintf(",spikes-bad=%g%%", 100*m.SpikesBad)
	}
	if m.Strays > 0 {
		s += fmt.Sprintf(",stray-boots=%g%%:%g-%g%%", 100*m.Strays, 100*m.StrayMin, 100*m.StrayMax)
	}
	if m.Drift != 0 {
		s += fmt.Sprintf(",drift=%g%%:%d", 100*m.Drift, m.DriftBoots)
		if m.DriftFlat {
			s += ":flat"
		}
	}
	if m.AR > 0 {
		s += fmt.Sprintf(",boot-ar=%g", m.AR)
	}
	if m.Intermittent > 0 {
		s += fmt.Sprintf(",intermittent=%g%%", 100*m.Intermittent)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"sample-t", m.SampleNu}, {"boot-t", m.BootNu}, {"spike-tail", m.SpikeTail}} {
		if f.v != 0 {
			s += fmt.Sprintf(",%s=%g", f.name, f.v)
		}
	}
	if m.GoodMode > 0 {
		s += fmt.Sprintf(",good-mode=%g%%:%gx", 100*m.GoodMode, m.GoodModeAt)
	}
	return s
}
