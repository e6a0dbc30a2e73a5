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

func TestParseSaysWhatIsWrong(t *testing.T) {
	for in, want := range map[string]string{
		"spread":                 `"spread": write setting=value, as in spread=0.2`,
		"noise=1":                `"noise": no such setting; the settings are spread, boot-spread, bad-boots, stray-boots, spikes and flips`,
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
