package simulate

import (
	"context"
	"math/rand/v2"
	"testing"

	"kbisect/drive"
)

// TestAPoolOfMachinesSharesOnePosterior: 24 seeded bisections of 1,024
// commits (7 vs 15 µs, σ 0.2, 5 % spikes) on 1, 2 and 4 machines that
// boot at once into one posterior: every answer right, the wall time
// with 2 machines at most 0.66 of one machine's (0.62 measured) and
// with 4 at most 0.48 (0.45). Machines at levels 30 % apart (log-normal)
// give the very same boots: each machine's level is learned from its
// own endpoints' boots and its samples are weighed at it, and the
// simulated noise scales with the level.
func TestAPoolOfMachinesSharesOnePosterior(t *testing.T) {
	hours := map[int]float64{}
	boots := map[int]float64{}
	for _, c := range []struct {
		machines int
		spread   float64
	}{{1, 0}, {2, 0}, {4, 0}, {4, 0.3}} {
		cfg := Config{Commits: 1024, Runs: 24, Seed: 3, Good: 7000, Bad: 15000, Noise: mustNoise(t, "spread=0.2,spikes=5%:2-20x"),
			Strategies: []string{"kbisect"}, Machines: c.machines, MachineSpread: c.spread}
		res, err := Run(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := res.Strategies[0]
		if s.Right != cfg.Runs {
			t.Errorf("%d machines (spread %g): %d right, %d wrong, %d inconclusive, %d not reproduced of %d", c.machines, c.spread, s.Right, s.WrongFound, s.Inconclusive, s.NotReproduced, cfg.Runs)
		}
		t.Logf("%d machines (spread %g): %.1f boots, %.2f hours", c.machines, c.spread, s.MeanBoots, s.MeanHours)
		if c.spread > 0 {
			if s.MeanBoots != boots[c.machines] || s.MeanHours != hours[c.machines] {
				t.Errorf("machines 30 %% apart: %.2f boots, %.3f hours; alike: %.2f, %.3f", s.MeanBoots, s.MeanHours, boots[c.machines], hours[c.machines])
			}
			continue
		}
		hours[c.machines], boots[c.machines] = s.MeanHours, s.MeanBoots
	}
	if r := hours[2] / hours[1]; r > 0.66 {
		t.Errorf("2 machines take %.2f of one machine's wall time, want at most 0.66", r)
	}
	if r := hours[4] / hours[1]; r > 0.48 {
		t.Errorf("4 machines take %.2f of one machine's wall time, want at most 0.48", r)
	}
}

// TestAMachineWaitsForAKernelAnotherIsBuilding: two machines that boot
// one new commit at once: the first builds it (10 min) and boots it;
// the second builds nothing, but its boot begins when that build ends,
// not at once. Until then the first machine's kernel is not built, and
// a kernel in the cache before is.
func TestAMachineWaitsForAKernelAnotherIsBuilding(t *testing.T) {
	cfg := &Config{Commits: 64, Good: 7000, Bad: 15000, Noise: mustNoise(t, "spread=0.2"), Costs: Costs{Build: 600, Boot: 120, Sample: 60}}
	l := newLab(cfg, 32, rand.New(rand.NewPCG(1, 2)))
	p := newPool(l, 2, 0, nil)
	one := func([]float64) bool { return false }
	p.Start(0, drive.Kernel{Commit: 40}, one)
	if p.KernelBuilt(0) {
		t.Errorf("at 0 s the kernel under way on machine 0 is built already")
	}
	p.Start(1, drive.Kernel{Commit: 40}, one)
	if want := 600.0 + 120 + 60; p.clock[0] != want || p.clock[1] != want {
		t.Errorf("the boots end at %g s and %g s, want both at %g s (the second waits for the first's build, then boots)", p.clock[0], p.clock[1], want)
	}
	if l.spent.builds != 1 {
		t.Errorf("%d builds, want 1", l.spent.builds)
	}
	if i, _, _ := p.Wait(context.Background()); !p.KernelBuilt(1 - i) {
		t.Errorf("at %g s machine %d's kernel is not built", p.now, 1-i)
	}
	p.Start(0, drive.Kernel{Commit: 10}, one)
	p.Start(1, drive.Kernel{Commit: 40}, one)
	if p.KernelBuilt(0) || !p.KernelBuilt(1) || p.clock[1] != p.now+180 {
		t.Errorf("at %g s: machine 0 (building commit 10) built %v, machine 1 (commit 40, in the cache) built %v and ends at %g s", p.now, p.KernelBuilt(0), p.KernelBuilt(1), p.clock[1])
	}
}
