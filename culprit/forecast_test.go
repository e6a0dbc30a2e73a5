package culprit

import (
	"testing"
)

// A forecast runs copies of the search, not the search: the next step
// and the probabilities are the same after it, the same search forecasts
// the same, its range holds its median, and it shrinks as the search
// goes, to the confirmation's few boots once a candidate leads.
func TestForecastLeavesTheSearchAndShrinksAsItGoes(t *testing.T) {
	d := Chain(256)
	l := newLab(t, 2, d, 170)
	s := l.calibrated(Options{Revert: true, Costs: Costs{Build: 600, Boot: 120, Sample: 60}})
	var said []Forecast
	for i := 0; ; i++ {
		before := s.Next()
		if before.Kind != Measure {
			break
		}
		pc, _ := s.Probabilities()
		f := s.Forecast(6)
		if i == 0 {
			if again := s.Forecast(6); again != f {
				t.Fatalf("the same search forecast %+v, then %+v", f, again)
			}
		}
		after := s.Next()
		if after.Commit != before.Commit || after.Reverted != before.Reverted || after.Confirming != before.Confirming || after.Probability != before.Probability {
			t.Fatalf("boot %d: Next asked for %+v before the forecast, %+v after", s.Boots(), before, after)
		}
		if pc2, _ := s.Probabilities(); pc2[170] != pc[170] {
			t.Fatalf("boot %d: the forecast moved the posterior", s.Boots())
		}
		if f.Runs != 6 || f.Boots < 1 || f.BootsLow > f.Boots || f.BootsHigh < f.Boots || f.SecondsLow > f.Seconds || f.SecondsHigh < f.Seconds ||
			f.Seconds < float64(f.Boots)*(120+60) {
			t.Fatalf("boot %d: forecast %+v", s.Boots(), f)
		}
		said = append(said, f)
		l.measure(s, after)
	}
	first, last := said[0], said[len(said)-1]
	if first.Boots < 8 || last.Boots > 3 || first.Seconds <= last.Seconds {
		t.Errorf("the first forecast %+v, the last %+v: want many boots left at the start, the last boot's at the end", first, last)
	}
	t.Logf("%d boots: forecast %d (%d–%d) at the first, %d (%d–%d) at the last", len(said), first.Boots, first.BootsLow, first.BootsHigh, last.Boots, last.BootsLow, last.BootsHigh)
}
