package simlab

import (
	"strings"
	"testing"
	"time"
)

func TestTheRegressionLandsWhereAsked(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		for _, where := range []Placement{OnMainline, OnTopic} {
			opt := Options{Seed: seed, Commits: 300, Regression: where}
			if err := opt.Validate(); err != nil {
				t.Fatal(err)
			}
			p, err := newPlan(opt)
			if err != nil {
				t.Fatalf("seed %d %v: %v", seed, where, err)
			}
			c := p.planted
			parent := p.h.Commits[c].Parents[0]
			if p.onFP[c] != (where == OnMainline) || !p.inRange(c) || p.kinds[c] != kindRegression || p.broken[c] || p.broken[parent] {
				t.Errorf("seed %d %v: commit %d, on the mainline %v, in range %v, broken %v, parent broken %v",
					seed, where, c, p.onFP[c], p.inRange(c), p.broken[c], p.broken[parent])
			}
			if got := p.expected(); len(got) != 1 || got[0] != c {
				t.Errorf("seed %d %v: expected %v, planted %d", seed, where, got, c)
			}
			if len(p.breaks) != DefaultBroken {
				t.Errorf("seed %d %v: %d breakages", seed, where, len(p.breaks))
			}
		}
	}
}

func TestOptionsRefuseWhatCannotBe(t *testing.T) {
	for _, c := range []struct {
		opt  Options
		want string
	}{
		{Options{Commits: 10}, "a history has 60 to 5000"},
		{Options{GoodNoise: 50 * time.Microsecond, BadNoise: 3 * time.Microsecond}, "not above the good one"},
		{Options{GoodNoise: 2500 * time.Nanosecond}, "whole microseconds"},
		{Options{Duration: 1500 * time.Millisecond}, "whole seconds"},
		{Options{Regression: 7}, "unknown placement"},
	} {
		if err := c.opt.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.opt, err, c.want)
		}
	}
	var o Options
	if err := o.Validate(); err != nil || o.Commits != 400 || o.GoodNoise != 3*time.Microsecond || o.BadNoise != 17*time.Microsecond || o.Duration != 10*time.Second {
		t.Errorf("defaults %+v: %v", o, err)
	}
}

func TestTheThresholdLiesBetweenTheLevels(t *testing.T) {
	for _, c := range []struct{ good, bad, want time.Duration }{
		{3 * time.Microsecond, 48 * time.Microsecond, 12 * time.Microsecond},
		{16 * time.Microsecond, 30 * time.Microsecond, 22 * time.Microsecond},
		{50 * time.Microsecond, 800 * time.Microsecond, 200 * time.Microsecond},
	} {
		if got := threshold(c.good, c.bad); got != c.want {
			t.Errorf("%v and %v: %v, want %v", c.good, c.bad, got, c.want)
		}
	}
}
