package simulate

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A trace is priced as one host spends it: the first build cold, the
// others incremental, every boot its overhead and samples; the floor is
// one cold build and the boots alone.
func TestSpeedPricesATraceBuildByBuildAndBootByBoot(t *testing.T) {
	c := speedPresets[0].costs
	trace := []bootRecord{{commit: 9, built: true, samples: 5}, {commit: -1, built: true, samples: 5},
		{commit: 4, built: true, samples: 3}, {commit: 9, samples: 4}, {commit: 4, reverted: true, built: true, samples: 3}}
	boots := 5*(c.kexec+c.settle) + 20*c.sample
	if got, want := speedPrice(trace, c, c.kexec+c.settle), c.cold+3*c.incremental+boots; got != want {
		t.Errorf("kbisect's price %v, want %v", got, want)
	}
	if got, want := speedFloor(trace, c), c.cold+boots; got != want {
		t.Errorf("floor %v, want %v", got, want)
	}
	if got, want := speedPrice(trace, c, c.ktestPerTry()), c.cold+3*c.incremental+5*2*c.reboot+20*c.sample; got != want {
		t.Errorf("ktest's price %v, want %v", got, want)
	}
}

func TestSpeedCostsAreLaidOverThePreset(t *testing.T) {
	c, err := parseSpeedCosts("cold=3m, incremental=40s", speedPresets[0].costs)
	if err != nil || c != speedPresets[1].costs {
		t.Errorf("the lab with a 64-core server's builds: %+v, %v; want %+v", c, err, speedPresets[1].costs)
	}
	for in, want := range map[string]string{"warm=1m": "the costs are cold, incremental", "cold=soon": `"soon" is not a duration`, "kexec=-1s": "not a duration"} {
		if _, err := parseSpeedCosts(in, speedPresets[0].costs); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

// On the seed report's noise, 500 commits: the engine names the planted
// culprit every time and never a wrong one, no run beats its floor, and
// what it spends above the floor is its builds after the first, exactly;
// the same seed boots the same kernels with the same samples; ktest as
// shipped builds and reboots once a step, git's 8 or 9 steps.
func TestSpeedKbisectIsItsFloorPlusItsBuildsAndNamesTheCulprit(t *testing.T) {
	c := speedPresets[0].costs
	cfg := speedConfig(t, speedNoises[0], 500, c)
	runs := speedRunAll(cfg, 20, 1, speedEngine)
	if again := speedRunAll(cfg, 20, 1, speedEngine); !reflect.DeepEqual(runs, again) {
		t.Error("the same seed gave other runs")
	}
	tally := tallySpeed("kbisect", "", runs, func(tr []bootRecord) time.Duration { return speedPrice(tr, c, c.kexec+c.settle) }, c)
	if tally.right != 20 || tally.wrong != 0 {
		t.Errorf("kbisect: %d right, %d wrong of 20", tally.right, tally.wrong)
	}
	for i, r := range runs {
		builds := 0
		for _, b := range r.trace {
			if b.built {
				builds++
			}
		}
		wall, floor := speedPrice(r.trace, c, c.kexec+c.settle), speedFloor(r.trace, c)
		if wall < floor || wall-floor != time.Duration(builds-1)*c.incremental || builds < 2 {
			t.Errorf("run %d: %v against a floor of %v with %d builds", i, wall, floor, builds)
		}
		if !r.trace[0].built || r.trace[0].commit != cfg.Commits-1 {
			t.Errorf("run %d: the first boot is %+v, not the bad endpoint's cold build", i, r.trace[0])
		}
	}
	// Predicting what to build ahead may change which commits the
	// search boots (a kernel built ahead weighs no build), not its
	// answers; building ahead never goes below the floor of its boots,
	// and on the whole saves time against the search that builds each
	// kernel when its boot comes.
	predicted := cfg
	predicted.predict = 1
	var with, without time.Duration
	for i, r := range speedRunAll(predicted, 20, 1, speedEngine) {
		if r.out.kind != runs[i].out.kind || r.out.culprit != runs[i].out.culprit || r.truth != runs[i].truth {
			t.Errorf("run %d: predicting changed the answer from %+v to %+v", i, runs[i].out, r.out)
		}
		ahead, floor := speedPriceAhead(r.trace, c, c.kexec+c.settle, 1), speedFloor(r.trace, c)
		if ahead < floor {
			t.Errorf("with builds ahead %v, below the floor %v", ahead, floor)
		}
		with += ahead
		without += speedPrice(runs[i].trace, c, c.kexec+c.settle)
	}
	if with >= without {
		t.Errorf("building ahead took %v in all, building as boots come %v", with, without)
	}
	t.Logf("20 runs: %v with builds ahead, %v without", with, without)
	kt := speedRunAll(cfg, 20, 3, speedKtest(ktestVariant{samples: 1, tries: 1, repeats: 1}))
	for i, r := range kt {
		k := time.Duration(len(r.trace))
		if k != 8 && k != 9 {
			t.Errorf("ktest run %d: %d steps, want git's 8 or 9", i, k)
		}
		if got, want := speedPrice(r.trace, c, c.ktestPerTry()), c.cold+(k-1)*c.incremental+k*(2*c.reboot+c.sample); got != want {
			t.Errorf("ktest run %d: %v, want %v", i, got, want)
		}
	}
}

// One sample a step is fooled by the good kernels' spikes; the median of
// a few in one run is not, and is what ktest is timed with at equal
// confidence; kbisect stays above its floor.
func TestSpeedKtestAtEqualConfidenceTakesMoreThanOneSample(t *testing.T) {
	c := speedPresets[1].costs
	rows := speedTable(speedConfig(t, speedNoises[0], 500, c), 40, c)
	by := map[string]speedTally{}
	for _, r := range rows {
		by[r.name] = r
	}
	if k := by["ktest"]; k.wrong < 5 {
		t.Errorf("ktest as shipped: %d wrong of 40; the spikes should fool it", k.wrong)
	}
	if e := by["ktest-equal"]; e.right != 40 || !strings.HasPrefix(e.about, "median of ") || e.hours <= by["ktest"].hours {
		t.Errorf("ktest at equal confidence: %+v", e)
	}
	if f, k := by["floor"], by["kbisect"]; f.hours > k.hours || k.right != 40 {
		t.Errorf("floor %.2f h, kbisect %.2f h, %d right", f.hours, k.hours, k.right)
	}
	// A build server's slots only add room: 2 slots build the same
	// boots' kernels as one (never slower); 4 look deeper, which may
	// change the boots; neither goes below the floor of its boots.
	if s := by["server-2"]; s.hours > by["kbisect"].hours || s.floorHours != by["kbisect"].floorHours {
		t.Errorf("server-2: %.2f h over a floor of %.2f h, one slot %.2f h over %.2f h", s.hours, s.floorHours, by["kbisect"].hours, by["kbisect"].floorHours)
	}
	for _, name := range []string{"server-2", "server-4"} {
		if s := by[name]; s.hours < s.floorHours || s.right != 40 {
			t.Errorf("%s: %.2f h (%d right), its floor %.2f h", name, s.hours, s.right, s.floorHours)
		}
	}
	// The oracle is right every time, in git's 8 or 9 one-sample steps,
	// and no strategy of kbisect's goes below it.
	if o, f := by["oracle"], by["oracle-floor"]; o.right != 40 || o.boots < 8 || o.boots > 9 || f.hours > o.hours || o.hours > by["server-4"].hours {
		t.Errorf("oracle %.2f h in %.1f boots (%d right), its floor %.2f h, server-4 %.2f h", o.hours, o.boots, o.right, f.hours, by["server-4"].hours)
	}
	// Machines booting into one posterior, each building when its boot
	// comes, are as right as one machine and take less wall time than one
	// that builds the same way, more machines less.
	if m2, m4, one := by["machines-2"], by["machines-4"], by["no-ahead"]; m2.right != 40 || m4.right != 40 || m2.hours >= one.hours || m4.hours >= m2.hours {
		t.Errorf("machines-2 %.2f h (%d right), machines-4 %.2f h (%d right), one machine %.2f h", m2.hours, m2.right, m4.hours, m4.right, one.hours)
	}
	if lines := speedLines(rows); len(lines) != 13 || !strings.Contains(lines[2], "| kbisect     |") || !strings.Contains(lines[2], "|      1.00 |") {
		t.Errorf("table:\n%s", strings.Join(lines, "\n"))
	}
}

// BISECT_TRIES stops a step at its first failing boot, so a bad kernel
// costs one boot and a good one every try; a vote boots every try.
func TestSpeedKtestTriesStopAtTheFirstFailureAndAVoteBootsThemAll(t *testing.T) {
	cfg := speedConfig(t, speedNoise{good: 3e3, bad: 50e3, limit: 20e3, model: "spread=0.01"}, 500, speedPresets[0].costs)
	for _, v := range []ktestVariant{{samples: 1, tries: 3, repeats: 1}, {samples: 3, tries: 3, repeats: 1, vote: true}} {
		for i, r := range speedRunAll(cfg, 10, 3, speedKtest(v)) {
			steps, bads := map[int]bool{}, 0
			for _, b := range r.trace {
				if !steps[b.commit] && b.commit >= r.truth {
					bads++
				}
				steps[b.commit] = true
			}
			want := 3 * len(steps)
			if !v.vote {
				want -= 2 * bads
			}
			if r.out.kind != "found" || r.out.culprit != r.truth || len(r.trace) != want {
				t.Errorf("%v, run %d: %+v after %d boots of %d steps (%d bad), want %d boots", v, i, r.out, len(r.trace), len(steps), bads, want)
			}
		}
	}
}

// ktest as shipped is `kbisect simulate`'s git-bisect row, and a test
// that takes the median of 10 its median-10 row: on the same lab they
// boot the same kernels, draw the same samples and name the same commit.
func TestSpeedKtestIsSimulatesPlainBisection(t *testing.T) {
	cfg := speedConfig(t, speedNoises[1], 500, speedPresets[0].costs)
	for _, n := range []int{1, 10} {
		for run := uint64(0); run < 20; run++ {
			truth := int(run * 37 % 500)
			a, b := newLab(&cfg, truth, rand.New(rand.NewPCG(5, run))), newLab(&cfg, truth, rand.New(rand.NewPCG(5, run)))
			got, _ := runKtest(&cfg, a, ktestVariant{samples: n, tries: 1, repeats: 1})
			if want := runFixed(&cfg, b, n); got != want || a.spent != b.spent {
				t.Errorf("%d samples, run %d: ktest %+v after %+v, simulate %+v after %+v", n, run, got, a.spent, want, b.spent)
			}
		}
	}
}
