package simulate

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"kbisect/internal/simnoise"
)

func mustNoise(t testing.TB, s string) simnoise.Model {
	t.Helper()
	m, err := simnoise.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// On spiky noise the engine names the right commit every time where one
// sample per commit is fooled, and the same seed gives the same tallies.
func TestTheEngineIsRightWhereOneSamplePerCommitIsFooled(t *testing.T) {
	cfg := Config{Commits: 512, Runs: 40, Seed: 3, Good: 7000, Bad: 15000, Noise: mustNoise(t, "spread=0.2,spikes=10%:2-20x,bad-boots=5%")}
	res, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]StrategyResult{}
	for _, s := range res.Strategies {
		by[s.Name] = s
		if s.Right+s.WrongFound+s.Inconclusive+s.NotReproduced != cfg.Runs {
			t.Errorf("%s: %d+%d+%d+%d outcomes for %d runs", s.Name, s.Right, s.WrongFound, s.Inconclusive, s.NotReproduced, cfg.Runs)
		}
	}
	if k := by["kbisect"]; k.Right < 39 || k.WrongFound != 0 {
		t.Errorf("kbisect: %+v", k)
	}
	if g := by["git-bisect"]; g.WrongFound < 5 {
		t.Errorf("git bisect with one sample a commit was fooled only %d times of %d: the noise is not what it says", g.WrongFound, cfg.Runs)
	}
	if k, g := by["kbisect"], by["git-bisect"]; !(k.MeanBoots > g.MeanBoots && g.MeanBoots == 9) {
		t.Errorf("boots: kbisect %.1f, git bisect %.1f (9 steps for 512 commits)", k.MeanBoots, g.MeanBoots)
	}
	again, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res, again) {
		t.Errorf("the same seed gave other tallies:\n%+v\n%+v", res.Strategies, again.Strategies)
	}
}

// The rule's one verdict per commit: a boot on the wrong side is a wrong
// verdict, which no later step revisits.
func TestTheRuleIsFooledByBootsOnTheWrongSide(t *testing.T) {
	cfg := Config{Commits: 1024, Runs: 60, Seed: 1, Good: 7000, Bad: 15000, Noise: mustNoise(t, "spread=0.2,bad-boots=10%"),
		Strategies: []string{"rule", "kbisect"}}
	res, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	rule, engine := res.Strategies[0], res.Strategies[1]
	if rule.WrongFound < 10 || engine.WrongFound != 0 || engine.Right < 58 {
		t.Errorf("rule %+v\nkbisect %+v", rule, engine)
	}
}

func TestConfigsThatCannotBeSimulatedSaySo(t *testing.T) {
	for want, cfg := range map[string]Config{
		"--good 7000, --bad 7000: the bad kernel's samples must be larger":     {Good: 7000, Bad: 7000},
		"no strategy \"bisect\"; the strategies are kbisect, rule, git-bisect": {Good: 1, Bad: 2, Strategies: []string{"bisect"}},
		"--confidence 1.5 is not between 0.5 and 1":                            {Good: 1, Bad: 2, Confidence: 1.5},
		"bad-boots 0.7 is not between 0 and 0.5":                               {Good: 1, Bad: 2, Noise: simnoise.Model{BadBoots: 0.7}},
		"samples 5 to 3: at least 1, the smaller first":                        {Good: 1, Bad: 2, MinSamples: 5, MaxSamples: 3},
	} {
		_, err := Run(context.Background(), cfg, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}

// BenchmarkAccuracyTable is the table: KBISECT_SIM_RUNS (default
// 100) seeded bisections of 8,192 commits per row, each strategy's share
// right and wrong reported as metrics. `kbisect simulate --runs 1000`
// prints the same rows.
func BenchmarkAccuracyTable(b *testing.B) {
	runs := 100
	if v := os.Getenv("KBISECT_SIM_RUNS"); v != "" {
		if _, err := fmtSscan(v, &runs); err != nil {
			b.Fatal(err)
		}
	}
	rows := []struct {
		name, noise string
		good, bad   float64
	}{
		{"spikes5", "spread=0.2,spikes=5%:2-20x", 7000, 15000},
		{"flips5", "spread=0.2,flips=5%", 7000, 15000},
		{"spread0.3", "spread=0.3,spikes=5%:2-20x", 7000, 15000},
		{"spikes15", "spread=0.2,spikes=15%:2-20x", 7000, 15000},
		{"spread0.4", "spread=0.4", 7000, 15000},
		{"badboots5", "spread=0.2,spikes=5%:2-20x,bad-boots=5%", 7000, 15000},
		{"bootspread0.25", "spread=0.2,boot-spread=0.25", 7000, 15000},
		{"combined", "spread=0.3,spikes=5%:2-20x,bad-boots=5%", 7000, 15000},
		{"seed", "spread=0.3", 3000, 49e6},
	}
	for _, row := range rows {
		b.Run(row.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				res, err := Run(context.Background(), Config{Runs: runs, Seed: 1, Good: row.good, Bad: row.bad, Noise: mustNoise(b, row.noise)}, nil)
				if err != nil {
					b.Fatal(err)
				}
				for _, s := range res.Strategies {
					b.ReportMetric(100*float64(s.Right)/float64(runs), s.Name+"-right-%")
					b.ReportMetric(100*float64(s.WrongFound)/float64(runs), s.Name+"-wrong-%")
					b.ReportMetric(s.MeanBoots, s.Name+"-boots")
					b.ReportMetric(s.MeanHours, s.Name+"-hours")
					b.ReportMetric(s.MeanSamples, s.Name+"-samples")
					b.ReportMetric(100*float64(s.Inconclusive)/float64(runs), s.Name+"-inconc-%")
					b.ReportMetric(100*float64(s.NotReproduced)/float64(runs), s.Name+"-notrep-%")
				}
			}
		})
	}
}

func fmtSscan(s string, v *int) (int, error) { return fmt.Sscan(s, v) }
