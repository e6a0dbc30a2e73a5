package simulate

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"kbisect/culprit"
	"kbisect/drive"
)

// forecastCoverage runs seeded bisections twice, on k machines (one:
// drive.Run; more: a simulated pool): once to learn how many search boots
// and seconds each takes, then again, the same boots, with the search's
// forecast taken at a quarter, half and three quarters of its boots, read
// as run --job reads it on k machines (drive.PoolShare). It counts how
// often the boots and the seconds (a pool's wall time) really left lie
// within the forecast's range.
func forecastCoverage(t *testing.T, noise string, commits, runs, ahead, k int) (inBoots, inSecs, points int) {
	t.Helper()
	cfg := Config{Commits: commits, Runs: runs, Seed: 1, Good: 7000, Bad: 15000, Noise: mustNoise(t, noise)}
	if k > 1 {
		cfg.Machines = k
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sc := drive.PoolShare(k)
	for run := range runs {
		want := rand.New(rand.NewPCG(cfg.Seed, uint64(run))).IntN(cfg.Commits)
		// pass bisects once, before hearing each search boot with the
		// lab's seconds then: the search's boots and the seconds at its
		// end (false: not reproduced at calibration, nothing to forecast).
		pass := func(before func(s *culprit.Search, now float64)) (int, float64, bool) {
			l := newLab(&cfg, want, rand.New(rand.NewPCG(cfg.Seed^0x9e3779b97f4a7c15, uint64(run)*64)))
			opt := engineOptions(&cfg, l)
			var p *pool
			if before != nil {
				opt.Hooks.Before = func(s *culprit.Search, _ culprit.Step) {
					now := l.spent.seconds
					if p != nil {
						now = p.now
					}
					before(s, now)
				}
			}
			var res drive.Result
			var err error
			if k > 1 {
				p = newPool(l, k, 0, l.machines)
				res, err = drive.RunPool(context.Background(), p, opt)
			} else {
				res, err = drive.Run(context.Background(), l, opt)
			}
			if err != nil || res.Search == nil {
				return 0, 0, false
			}
			if p != nil {
				return res.Search.Boots(), p.wall(), true
			}
			return res.Search.Boots(), l.spent.seconds, true
		}
		total, spent, ok := pass(nil)
		if !ok {
			continue
		}
		at := map[int]bool{total / 4: true, total / 2: true, 3 * total / 4: true}
		type said struct {
			f        culprit.Forecast
			boots    int
			secsThen float64
		}
		var forecasts []said
		again, end, _ := pass(func(s *culprit.Search, now float64) {
			if at[s.Boots()] {
				delete(at, s.Boots())
				forecasts = append(forecasts, said{s.Forecast(ahead), s.Boots(), now})
			}
		})
		if again != total || end != spent {
			t.Fatalf("run %d: the second pass took %d boots, the first %d: a forecast changed the search", run, again, total)
		}
		for _, f := range forecasts {
			left, secs := total-f.boots, spent-f.secsThen
			points++
			high := int(math.Ceil(float64(f.f.BootsHigh) * sc.Boots))
			if left >= f.f.BootsLow && left <= high {
				inBoots++
			}
			// Seconds left counted from the boot's start: the lab's
			// seconds then.
			low, mid, top := sc.SecondsLow*f.f.SecondsLow, sc.Seconds*f.f.Seconds, sc.Seconds*f.f.SecondsHigh
			if secs >= low-1 && secs <= top+1 {
				inSecs++
			}
			if testing.Verbose() && os.Getenv("KBISECT_FORECAST_TRACE") != "" {
				t.Logf("run %d at boot %d of %d: %d left (forecast %.0f, %d–%d), %.1f h left (%.1f, %.1f–%.1f)", run, f.boots, total, left,
					float64(f.f.Boots)*sc.Boots, f.f.BootsLow, high, secs/3600, mid/3600, low/3600, top/3600)
			}
		}
	}
	return inBoots, inSecs, points
}

// The forecast's range holds the boots the rest of the search really
// took at least 80 % of the time, at a quarter, half and three quarters
// of seeded bisections, on the noise its model knows. Its seconds are
// logged, not held to it: they hold 81–83 % in 48 forecasts a row, too
// near the goal for a test of 15 (docs/bisection.md "How long it
// takes"). More runs, for the note: KBISECT_FORECAST_RUNS=N.
func TestForecastHoldsWhatTheRestTakes(t *testing.T) {
	runs := 5
	if v := os.Getenv("KBISECT_FORECAST_RUNS"); v != "" {
		runs, _ = strconv.Atoi(v)
	}
	for _, noise := range []string{"spread=0.2,spikes=5%:2-20x", "spread=0.3,spikes=5%:2-20x,bad-boots=5%"} {
		inBoots, inSecs, points := forecastCoverage(t, noise, 1024, runs, 30, 1)
		t.Logf("%s: boots left within the forecast's range %d of %d, seconds %d of %d", noise, inBoots, points, inSecs, points)
		if points < 2*runs || float64(inBoots) < 0.8*float64(points) {
			t.Errorf("%s: the forecast's range held the boots left %d times of %d: want 80 %%", noise, inBoots, points)
		}
	}
}

// TestTheForecastOnSeveralMachines measures what run --job says of the
// time left on several machines: one machine's forecast of the seconds
// times drive.PoolShare (its low end times 1/k), the boots' high end
// times its Boots. Logged, not held (16
// runs a row measure it: too few here for a line at 80 %); more runs,
// for the note: KBISECT_FORECAST_RUNS=N.
func TestTheForecastOnSeveralMachines(t *testing.T) {
	runs := 2
	if v := os.Getenv("KBISECT_FORECAST_RUNS"); v != "" {
		runs, _ = strconv.Atoi(v)
	}
	for _, k := range []int{2, 4} {
		for _, noise := range []string{"spread=0.2,spikes=5%:2-20x", "spread=0.3,spikes=5%:2-20x,bad-boots=5%"} {
			inBoots, inSecs, points := forecastCoverage(t, noise, 1024, runs, 30, k)
			t.Logf("%d machines, %s: boots left within the forecast's range %d of %d, seconds %d of %d", k, noise, inBoots, points, inSecs, points)
			if points == 0 {
				t.Errorf("%d machines, %s: no forecast taken", k, noise)
			}
		}
	}
}
