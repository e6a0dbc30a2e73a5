package simnoise

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func TestParseReadsWhatStringWrites(t *testing.T) {
	m, err := Parse("spread=0.2, boot-spread=0.25,bad-boots=5%,spikes=5%:2-20x,flips=1%,stray-boots=25%:20-60%")
	if err != nil {
		t.Fatal(err)
	}
	want := Model{Spread: 0.2, BootSpread: 0.25, BadBoots: 0.05, Spikes: 0.05, SpikeMin: 2, SpikeMax: 20, Flips: 0.01}
	if math.Abs(m.BadBoots-want.BadBoots) > 1e-12 || math.Abs(m.Spikes-0.05) > 1e-12 || math.Abs(m.Flips-0.01) > 1e-12 ||
		m.Spread != want.Spread || m.BootSpread != want.BootSpread || m.SpikeMin != 2 || m.SpikeMax != 20 ||
		math.Abs(m.Strays-0.25) > 1e-12 || math.Abs(m.StrayMin-0.2) > 1e-12 || math.Abs(m.StrayMax-0.6) > 1e-12 {
		t.Fatalf("got %+v, want %+v", m, want)
	}
	again, err := Parse(m.String())
	if err != nil || again.String() != m.String() {
		t.Fatalf("round trip: %v, %q vs %q", err, again.String(), m.String())
	}
}

func TestParseReadsTheShapesOfARun(t *testing.T) {
	m, err := Parse("spread=0.2,boot-spread=0.1,drift=60%:40:flat,boot-ar=0.7,intermittent=50%,spikes=2%:3-10x,spikes-bad=50%")
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(m.Drift-0.6) > 1e-12 || m.DriftBoots != 40 || !m.DriftFlat || m.AR != 0.7 || math.Abs(m.Intermittent-0.5) > 1e-12 ||
		math.Abs(m.Spikes-0.02) > 1e-12 || !m.HasSpikesBad || math.Abs(m.SpikesBad-0.5) > 1e-12 || m.SpikeMin != 3 || m.SpikeMax != 10 {
		t.Fatalf("got %+v", m)
	}
	again, err := Parse(m.String())
	if err != nil || again != m {
		t.Fatalf("round trip of %q: %v, %+v", m.String(), err, again)
	}
	// A good kernel that never spikes, a bad one that does: the size
	// comes with the good kernel's share of none.
	m, err = Parse("spikes=0%:3-10x,spikes-bad=25%")
	if err != nil || m.SpikeMin != 3 || !m.HasSpikesBad {
		t.Fatalf("%+v, %v", m, err)
	}
	if again, err := Parse(m.String()); err != nil || again != m {
		t.Fatalf("round trip of %q: %v, %+v", m.String(), err, again)
	}
}

// Drift multiplies every boot's level by 1 + P·k/BOOTS, k its index in
// the run; a flat drift stops growing at BOOTS.
func TestDriftGrowsWithTheRunsBoots(t *testing.T) {
	for _, flat := range []bool{false, true} {
		r := Model{Drift: 0.6, DriftBoots: 40, DriftFlat: flat}.NewRun()
		rng := rand.New(rand.NewPCG(1, 1))
		for k := 0; k < 100; k++ {
			level, other := 7.0, 15.0
			if k%2 == 1 {
				level, other = other, level
			}
			got := r.Boot(rng, level, other, k%2 == 1).Sample()
			at := float64(k)
			if flat {
				at = math.Min(at, 40)
			}
			want := 7 * (1 + 0.6*at/40)
			if k%2 == 1 {
				want = 15 * (1 + 0.6*at/40)
			}
			if math.Abs(got-want) > 1e-9 {
				t.Fatalf("flat %v, boot %d: %g, want %g", flat, k, got, want)
			}
		}
		if r.Boots() != 100 {
			t.Fatalf("%d boots", r.Boots())
		}
	}
}

// AR(1) boot levels: each boot's log level is φ times the last one's plus
// a fresh part, so neighbours correlate by φ and the spread stays the
// boot spread.
func TestARBootLevelsCorrelateWithTheirNeighbours(t *testing.T) {
	r := Model{BootSpread: 0.25, AR: 0.7}.NewRun()
	rng := rand.New(rand.NewPCG(2, 3))
	const n = 20000
	z := make([]float64, n)
	for k := range z {
		z[k] = math.Log(r.Boot(rng, 7, 15, false).Sample() / 7)
	}
	var sd, lag float64
	for k := range z {
		sd += z[k] * z[k]
		if k > 0 {
			lag += z[k] * z[k-1]
		}
	}
	sd = math.Sqrt(sd / n)
	if rho := lag / n / (sd * sd); math.Abs(rho-0.7) > 0.03 {
		t.Errorf("lag-1 correlation %.3f, want 0.7", rho)
	}
	if math.Abs(sd-0.25) > 0.02 {
		t.Errorf("stationary spread %.3f, want 0.25", sd)
	}
}

// An intermittent regression shows on its share of a bad kernel's boots
// only; a good kernel's boots are untouched. A regression in how often
// it spikes gives the bad kernel its own share of spikes.
func TestIntermittentAndSpikyRegressionsShowAsTheySay(t *testing.T) {
	r := Model{Intermittent: 0.3, Spikes: 0.02, SpikeMin: 3, SpikeMax: 10, HasSpikesBad: true, SpikesBad: 0.5}.NewRun()
	rng := rand.New(rand.NewPCG(4, 5))
	const boots, n = 4000, 20
	shown, goodShown := 0, 0
	spikes := map[bool]int{}
	samples := map[bool]int{}
	for i := 0; i < boots; i++ {
		for _, bad := range []bool{false, true} {
			level, other := 7.0, 15.0
			if bad {
				level, other = other, level
			}
			b := r.Boot(rng, level, other, bad)
			for j := 0; j < n; j++ {
				x := b.Sample()
				if x > 20 {
					spikes[bad != b.OtherSide]++
				}
				samples[bad != b.OtherSide]++
				if j == 0 && x >= 15 && x < 15.0001 {
					if bad {
						shown++
					} else {
						goodShown++
					}
				}
			}
		}
	}
	// Spread 0: a sample at the bad level is exactly 15 unless it spiked.
	if share := float64(shown) / boots; math.Abs(share-0.3*0.5) > 0.025 {
		t.Errorf("%.3f of a bad kernel's first samples at the bad level, want 0.15 (30 %% of boots, half unspiked)", share)
	}
	if goodShown != 0 {
		t.Errorf("%d good boots at the bad level", goodShown)
	}
	// Spikes of 3-10x: a good boot's (7) land above 20; a showing bad
	// boot's (15) always do.
	if s := float64(spikes[false]) / float64(samples[false]); math.Abs(s-0.02) > 0.004 {
		t.Errorf("%.4f of the good-behaving boots' samples spiked, want 0.02", s)
	}
	if s := float64(spikes[true]) / float64(samples[true]); math.Abs(s-0.5) > 0.02 {
		t.Errorf("%.4f of the bad-behaving boots' samples spiked, want 0.5", s)
	}
}

func TestParseSaysWhatIsWrong(t *testing.T) {
	for in, want := range map[string]string{
		"spread":                 `"spread": write setting=value, as in spread=0.2`,
		"noise=1":                `"noise": no such setting; the settings are spread, boot-spread, bad-boots, stray-boots, spikes, flips, drift, boot-ar, intermittent, spikes-bad, sample-t, boot-t, spike-tail and good-mode`,
		"drift=60%":              `drift: "60%": write the growth and the boots it takes, as in 60%:40 (60%:40:flat to stop there)`,
		"drift=60%:0":            `drift: "60%:0": write the growth and the boots it takes, as in 60%:40 (60%:40:flat to stop there)`,
		"drift=60%:40:level":     `drift: "60%:40:level": write the growth and the boots it takes, as in 60%:40 (60%:40:flat to stop there)`,
		"boot-ar=1":              "boot-ar 1 is not between 0 and 1 (1 excluded)",
		"intermittent=150%":      "intermittent 1.5 is not between 0 and 1",
		"spikes-bad=50%":         "spike size 0-0x: give factors of at least 1, the smaller first",
		"stray-boots=25%":        `stray-boots: "25%": say how far toward the other side they land, as in 25%:20-60%`,
		"stray-boots=25%:60-20%": `stray-boots: "25%:60-20%": how far is a share of the way between 0 and 100%, the smaller first, as in 25%:20-60%`,
		"bad-boots=x":            `bad-boots: "x" is not a share: write 5% or 0.05`,
		"spikes=5%":              `spikes: "5%": say how large the spikes are, as in 5%:2-20x`,
		"spikes=5%:20-2x":        `spikes: "5%:20-2x": spike sizes are factors of at least 1, the smaller first, as in 5%:2-20x`,
		"bad-boots=60%":          "bad-boots 0.6 is not between 0 and 0.5",
		"spread=-1":              "spread -1 is not between 0 and 5",
	} {
		if _, err := Parse(in); err == nil || err.Error() != want {
			t.Errorf("Parse(%q) = %v, want %q", in, err, want)
		}
	}
}

// The model's knobs do what they say: the median of a boot's samples is
// its level; the boots' medians spread by BootSpread; BadBoots of them
// sit at the other side.
func TestBootsScatterAsTheModelSays(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := Model{Spread: 0.2, BootSpread: 0.25, BadBoots: 0.1}
	const boots, n = 4000, 41
	var logMedians []float64
	other := 0
	for i := 0; i < boots; i++ {
		b := m.NewBoot(rng, 7000, 15000)
		xs := make([]float64, n)
		for j := range xs {
			xs[j] = b.Sample()
		}
		sort.Float64s(xs)
		if b.OtherSide {
			other++
			continue
		}
		logMedians = append(logMedians, math.Log(xs[n/2]/7000))
	}
	if share := float64(other) / boots; math.Abs(share-0.1) > 0.015 {
		t.Errorf("%.3f of boots on the other side, want 0.1", share)
	}
	var mean, sq float64
	for _, v := range logMedians {
		mean += v
	}
	mean /= float64(len(logMedians))
	for _, v := range logMedians {
		sq += (v - mean) * (v - mean)
	}
	sd := math.Sqrt(sq / float64(len(logMedians)-1))
	// The median of 41 samples adds about 1.25·0.2/√41 ≈ 0.04 of spread.
	if math.Abs(mean) > 0.02 || math.Abs(sd-math.Hypot(0.25, 0.039)) > 0.02 {
		t.Errorf("boot medians: mean %.3f, sd %.3f; want 0 and %.3f", mean, sd, math.Hypot(0.25, 0.039))
	}
}

// Stray boots land partway: their medians sit between the sides, as far
// toward the other as the model says, and the other boots stay home.
func TestStrayBootsLandPartway(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	m := Model{Strays: 0.25, StrayMin: 0.2, StrayMax: 0.6}
	const boots = 4000
	strays := 0
	for i := 0; i < boots; i++ {
		b := m.NewBoot(rng, 1000, 100000)
		way := math.Log(b.Sample()/1000) / math.Log(100)
		switch {
		case way == 0:
		case way >= 0.2-1e-9 && way <= 0.6+1e-9:
			strays++
		default:
			t.Fatalf("a boot landed %.3f of the way, outside 0.2-0.6", way)
		}
	}
	if share := float64(strays) / boots; math.Abs(share-0.25) > 0.02 {
		t.Errorf("%.3f of boots strayed, want 0.25", share)
	}
}

func TestSpikesAndFlipsHitTheirShare(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m := Model{Spikes: 0.05, SpikeMin: 2, SpikeMax: 20, Flips: 0.1}
	b := m.NewBoot(rng, 1000, 100000)
	spikes, flips := 0, 0
	const n = 20000
	for i := 0; i < n; i++ {
		switch x := b.Sample(); {
		case x == 1000:
		case x > 1000 && x < 1000*20.0001:
			spikes++
		case x >= 100000:
			flips++
		default:
			t.Fatalf("sample %g is neither the level, a spike of it, nor the other side", x)
		}
	}
	if s := float64(spikes) / n; math.Abs(s-0.05*0.9) > 0.006 {
		t.Errorf("%.4f spikes on this side, want 0.045", s)
	}
	if f := float64(flips) / n; math.Abs(f-0.1) > 0.008 {
		t.Errorf("%.4f flips, want 0.1", f)
	}
	if b.Samples() != n {
		t.Errorf("Samples() = %d", b.Samples())
	}
}

func TestDrawSaysWhichSamplesAreFlips(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	b := Model{Spread: 0.1, Flips: 0.2}.NewBoot(rng, 1000, 100000)
	flips := 0
	for i := 0; i < 5000; i++ {
		x, flipped := b.Draw()
		if flipped != (x > 10000) {
			t.Fatalf("sample %g: flipped %v", x, flipped)
		}
		if flipped {
			flips++
		}
	}
	if f := float64(flips) / 5000; math.Abs(f-0.2) > 0.02 {
		t.Errorf("%.3f flips, want 0.2", f)
	}
}

// Heavy tails: a Student-t of ν degrees puts more of its draws far out
// than a normal of the same scale — at ν = 2, beyond 4 scales about 5.7 %
// (a normal 0.006 %, ν = 4 1.6 %); a Pareto spike of index 1 from 3× cut at 100× is
// below 6× half the time (log-uniform would put 20 % there); a good mode
// of 30 % at 1.6× moves that share of a good kernel's boots and none of
// a bad one's.
func TestHeavyTailsAndAGoodModeDrawAsTheySay(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 7))
	const n = 200000
	for _, c := range []struct {
		nu, beyond, tol float64
	}{{0, 0.00006, 0.0001}, {2, 0.0572, 0.003}, {4, 0.0161, 0.0015}} {
		far := 0
		for i := 0; i < n; i++ {
			if math.Abs(deviate(rng, c.nu)) > 4 {
				far++
			}
		}
		if got := float64(far) / n; math.Abs(got-c.beyond) > c.tol {
			t.Errorf("ν %g: %.4f beyond 4 scales, want %.4f", c.nu, got, c.beyond)
		}
	}
	// A gamma's mean is its shape, below 1 as above.
	for _, shape := range []float64{0.5, 1, 3.5} {
		sum := 0.0
		for i := 0; i < n; i++ {
			sum += gamma(rng, shape)
		}
		if got := sum / n; math.Abs(got-shape) > 0.02*shape+0.01 {
			t.Errorf("gamma of shape %g: mean %.3f", shape, got)
		}
	}
	m := Model{Spikes: 1, SpikeMin: 3, SpikeMax: 100, SpikeTail: 1}
	small, top := 0, 0.0
	for i := 0; i < n; i++ {
		f := m.spike(rng)
		if f < 3 || f > 100 {
			t.Fatalf("spike %g outside 3-100x", f)
		}
		if f < 6 {
			small++
		}
		top = math.Max(top, f)
	}
	// Cut at 100×: P(F < 6) = (1 − 3/6) / (1 − 3/100).
	if got := float64(small) / n; math.Abs(got-0.5/0.97) > 0.005 {
		t.Errorf("%.3f of Pareto spikes below 6x, want %.3f", got, 0.5/0.97)
	}
	if top < 90 {
		t.Errorf("the largest of %d Pareto spikes is %.1fx: the tail is missing", n, top)
	}
	r := Model{GoodMode: 0.3, GoodModeAt: 1.6}.NewRun()
	high := map[bool]int{}
	for i := 0; i < n/10; i++ {
		for _, bad := range []bool{false, true} {
			level, other := 7.0, 15.0
			if bad {
				level, other = other, level
			}
			if x := r.Boot(rng, level, other, bad).Sample(); x != level {
				if !bad && math.Abs(x-11.2) > 1e-9 {
					t.Fatalf("a good kernel's boot at %g, want 7 or 11.2", x)
				}
				high[bad]++
			}
		}
	}
	if got := float64(high[false]) / (n / 10); math.Abs(got-0.3) > 0.01 || high[true] != 0 {
		t.Errorf("%.3f of a good kernel's boots in its second mode (want 0.3), %d of a bad one's (want 0)", got, high[true])
	}
	p, err := Parse("spread=0.2,sample-t=2,boot-t=3,spike-tail=1.5,spikes=5%:2-200x,good-mode=30%:1.6x")
	if err != nil || p.SampleNu != 2 || p.BootNu != 3 || p.SpikeTail != 1.5 || math.Abs(p.GoodMode-0.3) > 1e-12 || p.GoodModeAt != 1.6 {
		t.Fatalf("%+v, %v", p, err)
	}
	if again, err := Parse(p.String()); err != nil || again != p {
		t.Fatalf("round trip of %q: %v, %+v", p.String(), err, again)
	}
	for _, bad := range []string{"sample-t=0.5", "boot-t=x", "spike-tail=0.01", "good-mode=30%", "good-mode=130%:2x", "good-mode=30%:-1x"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
