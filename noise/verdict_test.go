package noise

import (
	"kbisect/verdict"
	"math"
	"strings"
	"testing"
)

func usv(v ...float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x * 1e3
	}
	return out
}

func timeRule(threshold float64) Rule {
	return Rule{Kind: Absolute, Threshold: threshold * 1e3, MetricKind: KindTime, HigherIsBad: true, MinSamples: 3, MaxSamples: 10, Confidence: 0.95}
}

func decide(t *testing.T, r Rule, samples []float64) Decision {
	t.Helper()
	d, err := r.Decide(samples)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestClearKernelsAreDecidedAtTheMinimum(t *testing.T) {
	r := timeRule(20)
	if d := decide(t, r, usv(50.1, 49.5, 51.9)); d.Verdict != verdict.Bad || d.More || d.N != 3 {
		t.Errorf("the seed's bad kernel: %+v", d)
	}
	if d := decide(t, r, usv(0.007, 0.01, 0)); d.Verdict != verdict.Good || d.More {
		t.Errorf("the seed's good kernel: %+v", d)
	}
	d := decide(t, r, usv(50, 49))
	if d.Verdict != verdict.Unsure || !d.More || d.Reason != "2 of at least 3 samples" {
		t.Errorf("before the minimum: %+v", d)
	}
	d = decide(t, r, usv(50.1, 49.5, 51.9))
	if d.Reason != "median 50.1 µs beyond the threshold 20 µs, sure at 0.95" {
		t.Errorf("reason %q", d.Reason)
	}
}

func TestOneWildSampleNeverDecides(t *testing.T) {
	r := timeRule(20)
	r.MinSamples = 1
	if d := decide(t, r, usv(6000)); d.Verdict != verdict.Unsure || !d.More {
		t.Errorf("a 6 ms spike alone decided: %+v", d)
	}
	// A spike among typical good samples is outvoted.
	if d := decide(t, r, usv(3, 6000, 3.1, 2.9, 3.2)); d.Verdict != verdict.Good {
		t.Errorf("%+v", d)
	}
}

func TestSamplesAtTheThresholdEndUnsure(t *testing.T) {
	r := timeRule(10)
	samples := usv(9, 11, 10.5, 9.5, 10.2, 9.8, 10.1, 9.9, 10.3, 9.7)
	for n := 3; n < 10; n++ {
		if d := decide(t, r, samples[:n]); d.Verdict != verdict.Unsure || !d.More {
			t.Fatalf("after %d: %+v", n, d)
		}
	}
	d := decide(t, r, samples)
	if d.Verdict != verdict.Unsure || d.More || !strings.Contains(d.Reason, "not sure at 0.95 after 10 samples") {
		t.Errorf("at the maximum: %+v", d)
	}
}

func TestAvailabilityIsBadWhenLow(t *testing.T) {
	r := Rule{Kind: Absolute, Threshold: 99, MetricKind: KindPercent, MinSamples: 3, MaxSamples: 10, Confidence: 0.95}
	if d := decide(t, r, []float64{94.719, 94.705, 94.759}); d.Verdict != verdict.Bad {
		t.Errorf("the seed's 94.7%%: %+v", d)
	}
	if d := decide(t, r, []float64{100, 99.999, 100}); d.Verdict != verdict.Good {
		t.Errorf("100%%: %+v", d)
	}
	if d := decide(t, r, []float64{94.719, 94.705, 94.759}); !strings.Contains(d.Reason, "median 94.719% beyond the threshold 99.000%") {
		t.Errorf("reason %q", d.Reason)
	}
}

func TestRatioAndAutoThresholdsComeFromTheEndpoints(t *testing.T) {
	ratio := Rule{Kind: Ratio, Threshold: 3, MetricKind: KindTime, HigherIsBad: true, MinSamples: 3, MaxSamples: 10, Confidence: 0.95,
		Good: usv(3, 3.2, 2.9, 3.1)}
	d := decide(t, ratio, usv(30, 32, 29))
	if d.Verdict != verdict.Bad || formatNS(d.Threshold) != "9.15 µs" {
		t.Errorf("3x the good endpoint's 3.05 µs: %+v", d)
	}
	auto := Rule{Kind: Auto, MetricKind: KindTime, HigherIsBad: true, MinSamples: 3, MaxSamples: 10, Confidence: 0.95,
		Good: usv(7, 6, 8, 7.5, 6.5), Bad: usv(15, 14, 16, 15.5, 14.5)}
	if d := decide(t, auto, usv(14, 16, 15)); d.Verdict != verdict.Bad || formatNS(d.Threshold) != "10.2 µs" {
		t.Errorf("like the bad endpoint: %+v", d)
	}
	if d := decide(t, auto, usv(7, 6.8, 7.3)); d.Verdict != verdict.Good {
		t.Errorf("like the good endpoint: %+v", d)
	}
	swapped := auto
	swapped.Good, swapped.Bad = auto.Bad, auto.Good
	if _, err := swapped.Decide(usv(7)); err == nil || !strings.Contains(err.Error(), "the bad endpoint (median 7 µs) is not worse than the good one (median 15 µs)") {
		t.Errorf("got %v", err)
	}
}

func TestRulesThatCannotDecideAreErrors(t *testing.T) {
	base := timeRule(20)
	for _, c := range []struct {
		edit func(*Rule)
		want string
	}{
		{func(r *Rule) { r.MinSamples = 0 }, "samples min 0"},
		{func(r *Rule) { r.MaxSamples = 2 }, "samples min 3, max 2"},
		{func(r *Rule) { r.Confidence = 1 }, "confidence 1 is not between 0.5 and 1"},
		{func(r *Rule) { r.Threshold = 0 }, "threshold 0"},
		{func(r *Rule) { r.Kind = Ratio }, "a ratio threshold needs a ratio above 1 and the good endpoint's samples"},
		{func(r *Rule) { r.Kind = Auto }, "threshold auto needs at least 2 samples of each endpoint"},
	} {
		r := base
		c.edit(&r)
		if _, err := r.Decide(usv(1, 2, 3)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

func TestValuesAreWrittenWithTheirUnits(t *testing.T) {
	for v, want := range map[float64]string{7: "7 ns", 14e3: "14 µs", 50163e3: "50,163 µs", 1.5e3: "1.5 µs", 1068: "1.07 µs", 2e9 + 5e7: "2.05 s", 311977e3: "311,977 µs"} {
		if got := FormatValue(KindTime, v); got != want {
			t.Errorf("%v: %q, want %q", v, got, want)
		}
	}
}

func TestAvailabilityNearOneHundredPercent(t *testing.T) {
	r := Rule{Kind: Absolute, Threshold: 99.9, MetricKind: KindPercent, MinSamples: 3, MaxSamples: 10, Confidence: 0.95}
	good := []float64{99.99, 99.995, 99.99}
	bad := []float64{99.5, 99.4, 99.52}
	if d := decide(t, r, good); d.Verdict != verdict.Good || formatPct(d.Threshold) != "99.900%" {
		t.Errorf("99.99%%: %+v", d)
	}
	if d := decide(t, r, bad); d.Verdict != verdict.Bad {
		t.Errorf("99.5%%: %+v", d)
	}
	auto := r
	auto.Kind, auto.Good, auto.Bad = Auto, []float64{99.99, 99.991, 99.989, 99.99}, []float64{99.5, 99.45, 99.55, 99.5}
	if d := decide(t, auto, good); d.Verdict != verdict.Good {
		t.Errorf("auto, like good: %+v", d)
	}
	if d := decide(t, auto, bad); d.Verdict != verdict.Bad {
		t.Errorf("auto, like bad: %+v", d)
	}
	// A ratio of what is stolen: 0.01 % stolen twice over is 0.02 %.
	ratio := r
	ratio.Kind, ratio.Threshold, ratio.Good = Ratio, 2, []float64{99.99, 99.99, 99.99}
	d := decide(t, ratio, []float64{60, 61, 59})
	if d.Verdict != verdict.Bad || formatPct(d.Threshold) != "99.980%" {
		t.Errorf("ratio: %+v", d)
	}
}

func formatPct(v float64) string { return FormatValue(KindPercent, v) }

func TestZerosAndNonNumbersDoNotFoolTheRule(t *testing.T) {
	auto := Rule{Kind: Auto, MetricKind: KindTime, HigherIsBad: true, MinSamples: 3, MaxSamples: 10, Confidence: 0.95,
		Good: []float64{0, 0, 0, 0}, Bad: usv(5, 5.2, 4.9, 5.1)}
	// 50 times below the bad endpoint is good, however silent the good one.
	if d := decide(t, auto, usv(0.1, 0.1, 0.1)); d.Verdict != verdict.Good {
		t.Errorf("%+v", d)
	}
	ratio := Rule{Kind: Ratio, Threshold: 3, MetricKind: KindTime, HigherIsBad: true, MinSamples: 3, MaxSamples: 10, Confidence: 0.95, Good: []float64{0, 0, 0}}
	if _, err := ratio.Decide(usv(1, 1, 1)); err == nil || !strings.Contains(err.Error(), "the good endpoint's median is 0 ns: no ratio of it means anything") {
		t.Errorf("got %v", err)
	}
	r := timeRule(20)
	if _, err := r.Decide([]float64{1, math.NaN(), 3}); err == nil || !strings.Contains(err.Error(), "NaN is not a measurement") {
		t.Errorf("got %v", err)
	}
	if d := decide(t, r, nil); d.Median != 0 || !d.More {
		t.Errorf("no samples: %+v", d)
	}
	strict := r
	strict.Confidence, strict.MinSamples, strict.MaxSamples = 0.99, 3, 3
	if _, err := strict.Decide(usv(50)); err == nil || !strings.Contains(err.Error(), "3 samples at most can never reach confidence 0.99 (it needs 4 samples that agree)") {
		t.Errorf("got %v", err)
	}
}
