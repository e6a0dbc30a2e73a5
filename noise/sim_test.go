package noise

import (
	"kbisect/verdict"
	"math"
	"math/rand/v2"
	"testing"
)

// lognormal draws samples with the given median and log-spread: noise
// metrics are positive, skewed and multiplicative. With spikes > 0, that
// share of samples is 20 times larger (an SMI, a firmware hiccup).
type lognormal struct{ median, sigma, spikes float64 }

func (d lognormal) draw(rng *rand.Rand) float64 {
	x := d.median * math.Exp(d.sigma*rng.NormFloat64())
	if rng.Float64() < d.spikes {
		x *= 20
	}
	return x
}

func (d lognormal) n(rng *rand.Rand, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = d.draw(rng)
	}
	return out
}

// simCase is one simulated bisection situation: the two kinds of kernel
// and how the rule is set up from a calibration of both endpoints.
type simCase struct {
	name      string
	good, bad lognormal
	rule      func(calGood, calBad []float64) Rule
}

// simResult counts what a rule did over many kernels.
type simResult struct {
	wrong, unsure, samples float64 // shares of verdicts, mean samples per verdict
}

// The cases of the issue: the seed's (a few µs against ~50 µs per isolated
// CPU, tight) and the hard one (oslat-like 7 µs against 15 µs with
// overlapping spread), each with an absolute threshold and with auto.
var simCases = []simCase{
	{"seed-like/absolute-20us", lognormal{3e3, 0.3, 0}, lognormal{50e3, 0.08, 0}, absoluteRule(20e3)},
	{"seed-like/auto", lognormal{3e3, 0.3, 0}, lognormal{50e3, 0.08, 0}, autoRule},
	{"hard/absolute-10us", lognormal{7e3, 0.4, 0}, lognormal{15e3, 0.4, 0}, absoluteRule(10e3)},
	{"hard/auto", lognormal{7e3, 0.4, 0}, lognormal{15e3, 0.4, 0}, autoRule},
	// One sample in ten is a spike beyond the threshold on every kernel:
	// the typical sample, not the spike, must decide.
	{"spiky/absolute-20us", lognormal{3e3, 0.3, 0.1}, lognormal{50e3, 0.08, 0.1}, absoluteRule(20e3)},
	{"spiky/auto", lognormal{3e3, 0.3, 0.1}, lognormal{50e3, 0.08, 0.1}, autoRule},
}

func absoluteRule(t float64) func(g, b []float64) Rule {
	return func(g, b []float64) Rule {
		return Rule{Kind: Absolute, Threshold: t, MetricKind: KindTime, HigherIsBad: true,
			MinSamples: 3, MaxSamples: 10, Confidence: 0.95, Good: g, Bad: b}
	}
}

func autoRule(g, b []float64) Rule {
	return Rule{Kind: Auto, MetricKind: KindTime, HigherIsBad: true,
		MinSamples: 3, MaxSamples: 10, Confidence: 0.95, Good: g, Bad: b}
}

// simulate runs the sequential rule and the fixed rule (the median of 10
// samples against the same threshold) on trials good and trials bad
// kernels, each with its own calibration of 10 samples per endpoint.
func simulate(t testing.TB, c simCase, seed uint64, trials int) (seq, fixed simResult) {
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < 2*trials; i++ {
		kernel, truth := c.good, verdict.Good
		if i%2 == 1 {
			kernel, truth = c.bad, verdict.Bad
		}
		// A calibration that cannot tell the endpoints apart is measured
		// again (a run would take more samples or stop as not reproduced).
		rule := c.rule(c.good.n(rng, 10), c.bad.n(rng, 10))
		for _, err := rule.Decide(nil); err != nil; _, err = rule.Decide(nil) {
			rule = c.rule(c.good.n(rng, 10), c.bad.n(rng, 10))
		}
		var samples []float64
		var d Decision
		for {
			samples = append(samples, kernel.draw(rng))
			var err error
			if d, err = rule.Decide(samples); err != nil {
				t.Fatal(err)
			}
			if !d.More {
				break
			}
		}
		seq.samples += float64(len(samples))
		switch d.Verdict {
		case verdict.Unsure:
			seq.unsure++
		case truth:
		default:
			seq.wrong++
		}
		// The fixed rule: 10 samples, median against the same threshold.
		for len(samples) < 10 {
			samples = append(samples, kernel.draw(rng))
		}
		fixedVerdict := verdict.Good
		if Median(samples[:10]) > d.Threshold {
			fixedVerdict = verdict.Bad
		}
		fixed.samples += 10
		if fixedVerdict != truth {
			fixed.wrong++
		}
	}
	n := float64(2 * trials)
	for _, r := range []*simResult{&seq, &fixed} {
		r.wrong /= n
		r.unsure /= n
		r.samples /= n
	}
	return seq, fixed
}

// TestSequentialRuleIsAsRightAsTenSamplesWithFewer is the goal on a
// seeded simulation: no more wrong verdicts than a fixed 10 samples, with
// at least 40 % fewer samples.
func TestSequentialRuleIsAsRightAsTenSamplesWithFewer(t *testing.T) {
	for _, c := range simCases {
		seq, fixed := simulate(t, c, 42, 10000)
		t.Logf("%-24s sequential: wrong %.4f unsure %.4f samples %.2f | fixed-10: wrong %.4f", c.name, seq.wrong, seq.unsure, seq.samples, fixed.wrong)
		if seq.wrong > fixed.wrong {
			t.Errorf("%s: %.4f wrong verdicts, fixed-10 has %.4f", c.name, seq.wrong, fixed.wrong)
		}
		if seq.samples > 6 {
			t.Errorf("%s: %.2f samples per verdict, want at most 6 (40 %% fewer than 10)", c.name, seq.samples)
		}
	}
}

// BenchmarkSequentialVerdict reports the simulation's numbers per case
// (go test ./noise -run '^$' -bench SequentialVerdict).
func BenchmarkSequentialVerdict(b *testing.B) {
	for _, c := range simCases {
		b.Run(c.name, func(b *testing.B) {
			var seq, fixed simResult
			for i := 0; i < b.N; i++ {
				seq, fixed = simulate(b, c, uint64(i+1), 2000)
			}
			b.ReportMetric(seq.wrong, "wrong/verdict")
			b.ReportMetric(seq.unsure, "unsure/verdict")
			b.ReportMetric(seq.samples, "samples/verdict")
			b.ReportMetric(fixed.wrong, "fixed10-wrong/verdict")
		})
	}
}
