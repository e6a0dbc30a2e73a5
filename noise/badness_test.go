package noise

import "testing"

// A quiet sample stays distinct from a quieter one wherever the metric
// resolves them: a throughput (lower is worse) of 50,000 against 40,000,
// an availability of 99.99985 % against 99.9999 %, 3 ns against 2 ns; and
// a sample of nothing sits at the floor, not at log 0.
func TestBadnessOfKeepsWhatTheMetricResolves(t *testing.T) {
	for _, c := range []struct {
		name          string
		rule          Rule
		better, worse float64
	}{
		{"throughput", Rule{MetricKind: KindNumber}, 50000, 40000},
		{"availability", Rule{MetricKind: KindPercent}, 99.9999, 99.99985},
		{"noise", Rule{MetricKind: KindTime, HigherIsBad: true}, 2, 3},
		{"count", Rule{MetricKind: KindNumber, HigherIsBad: true}, 0.5, 2},
	} {
		b, w := c.rule.BadnessOf(c.better), c.rule.BadnessOf(c.worse)
		if !(b > 0 && w > b) {
			t.Errorf("%s: badness %g of %g and %g of %g; want 0 < the first < the second", c.name, b, c.better, w, c.worse)
		}
	}
	if got := (Rule{MetricKind: KindTime, HigherIsBad: true}).BadnessOf(0); got != 1 {
		t.Errorf("0 ns of noise: badness %g, want the 1 ns floor", got)
	}
	if got := (Rule{MetricKind: KindPercent}).BadnessOf(100); got != 1e-6 {
		t.Errorf("100 %% available: badness %g, want the 1e-6 floor", got)
	}
}

func TestTidyKeepsWhatAValueMeans(t *testing.T) {
	for _, c := range []struct {
		kind    string
		in, out float64
	}{
		{KindTime, 999999.9999999995, 1e6},
		{KindTime, 10246.950765959598, 10247},
		{KindPercent, 99.99931234567, 99.9993},
		{KindPercent, 0.0882376075665611, 0.0882376},
		{"", 52885999.9999999, 52886000},
		{"", 0, 0},
	} {
		if got := Tidy(c.kind, c.in); got != c.out {
			t.Errorf("Tidy(%s, %v) = %v, want %v", c.kind, c.in, got, c.out)
		}
	}
}
