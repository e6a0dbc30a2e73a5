package noise

import (
	"fmt"
	"kbisect/verdict"
	"math"
	"sort"
	"strings"
)

// ThresholdKind says how a rule's threshold is set.
type ThresholdKind int

// Kinds of thresholds.
const (
	// Absolute: bad beyond Threshold, in the metric's unit.
	Absolute ThresholdKind = iota
	// Ratio: bad beyond Threshold times the good endpoint's median (or
	// below it divided by Threshold, when lower is bad).
	Ratio
	// Auto: bad when more like the bad endpoint than the good one, both
	// measured at calibration.
	Auto
)

// Rule turns a kernel's samples (one value per sample: the aggregate of
// its CPUs) into good, bad or unsure. Sampling is sequential: after each
// sample, Decide says whether the evidence is enough at the rule's
// confidence, so clear kernels stop after MinSamples and only doubtful
// ones take up to MaxSamples.
type Rule struct {
	Kind      ThresholdKind
	Threshold float64
	// Kind of the metric (KindTime, KindPercent, …) and its direction.
	MetricKind  string
	HigherIsBad bool
	MinSamples  int
	MaxSamples  int
	// Confidence bounds both wrong verdicts: good called bad, bad good.
	Confidence float64
	// Good and Bad are the endpoints' samples from calibration: required
	// for Ratio (Good) and Auto (both); with the others they give the
	// spread of the measurements.
	Good, Bad []float64
}

// Decision is the rule's answer on the samples so far, with its numbers.
type Decision struct {
	Verdict verdict.Verdict `json:"verdict"`
	// More says the verdict is unsure and the rule wants another sample.
	More bool `json:"more,omitempty"`
	N    int  `json:"n"`
	// Median of the samples, and the threshold as a value of the metric.
	Median    float64 `json:"median"`
	Threshold float64 `json:"threshold"`
	// Evidence is the log-likelihood ratio for bad over good; the rule
	// stops at ±Bound.
	Evidence float64 `json:"evidence"`
	Bound    float64 `json:"bound"`
	Reason   string  `json:"reason"`
}

// Model constants, in the log scale the rule works in (noise is
// heavy-tailed and multiplicative: 10 µs vs 20 µs is as far as 50 vs 100).
const (
	// minSpread is the smallest spread believed: no machine measures its
	// noise to better than 5 %.
	minSpread = 0.05
	// indifference is half the effect looked for when no bad endpoint
	// says how large it is: ±25 % around the threshold is "near it".
	indifference = 0.2231 // ln(1.25)
	// maxOdds caps what one sample can say, at 4:1 (its log): a spike
	// from an SMI or a firmware hiccup, which the normal model calls
	// impossible, must not decide alone, so a verdict always rests on
	// several samples agreeing.
	maxOdds = 1.3863 // ln(4)
)

// Decide applies the rule to the samples taken so far.
func (r Rule) Decide(samples []float64) (Decision, error) {
	if err := r.check(); err != nil {
		return Decision{}, err
	}
	m, err := r.model(samples)
	if err != nil {
		return Decision{}, err
	}
	if err := finite(samples); err != nil {
		return Decision{}, fmt.Errorf("verdict rule: %v", err)
	}
	d := Decision{N: len(samples), Threshold: m.threshold, Bound: r.bound()}
	if len(samples) > 0 {
		d.Median = Median(samples)
	}
	for _, x := range samples {
		e := m.delta / (m.sigma * m.sigma) * (m.scale(x) - m.mid)
		d.Evidence += math.Max(-maxOdds, math.Min(maxOdds, e))
	}
	switch {
	case len(samples) < r.MinSamples:
		d.Verdict, d.More = verdict.Unsure, true
		d.Reason = fmt.Sprintf("%d of at least %d samples", len(samples), r.MinSamples)
	case d.Evidence >= d.Bound:
		d.Verdict, d.Reason = verdict.Bad, fmt.Sprintf("median %s beyond the threshold %s, sure at %g", r.format(d.Median), r.format(d.Threshold), r.Confidence)
	case d.Evidence <= -d.Bound:
		d.Verdict, d.Reason = verdict.Good, fmt.Sprintf("median %s within the threshold %s, sure at %g", r.format(d.Median), r.format(d.Threshold), r.Confidence)
	case len(samples) >= r.MaxSamples:
		d.Verdict = verdict.Unsure
		d.Reason = fmt.Sprintf("median %s against the threshold %s: not sure at %g after %d samples", r.format(d.Median), r.format(d.Threshold), r.Confidence, len(samples))
	default:
		d.Verdict, d.More = verdict.Unsure, true
		d.Reason = fmt.Sprintf("median %s against the threshold %s: not sure yet", r.format(d.Median), r.format(d.Threshold))
	}
	return d, nil
}

func (r Rule) check() error {
	switch {
	case r.MinSamples < 1 || r.MaxSamples < r.MinSamples:
		return fmt.Errorf("verdict rule: samples min %d, max %d", r.MinSamples, r.MaxSamples)
	case !(r.Confidence > 0.5 && r.Confidence < 1):
		return fmt.Errorf("verdict rule: confidence %g is not between 0.5 and 1", r.Confidence)
	case r.Kind == Absolute && !(r.Threshold > 0 && !math.IsInf(r.Threshold, 0)):
		return fmt.Errorf("verdict rule: threshold %g", r.Threshold)
	case r.Kind == Absolute && r.MetricKind == KindPercent && !r.HigherIsBad && r.Threshold >= 100:
		return fmt.Errorf("verdict rule: threshold %g%% leaves nothing to steal", r.Threshold)
	case r.Kind == Ratio && (!(r.Threshold > 1 && !math.IsInf(r.Threshold, 0)) || len(r.Good) == 0):
		return fmt.Errorf("verdict rule: a ratio threshold needs a ratio above 1 and the good endpoint's samples")
	case r.Kind == Auto && (len(r.Good) < 2 || len(r.Bad) < 2):
		return fmt.Errorf("verdict rule: threshold auto needs at least 2 samples of each endpoint")
	}
	for _, set := range [][]float64{r.Good, r.Bad} {
		if err := finite(set); err != nil {
			return fmt.Errorf("verdict rule: endpoint samples: %v", err)
		}
	}
	// Each sample counts for at most maxOdds: fewer samples than this can
	// never reach the confidence.
	if need := int(math.Ceil(r.bound() / maxOdds)); r.MaxSamples < need {
		return fmt.Errorf("verdict rule: %d samples at most can never reach confidence %g (it needs %d samples that agree)", r.MaxSamples, r.Confidence, need)
	}
	return nil
}

// bound is where the evidence stops the rule: ±ln((1+c)/(1−c)).
func (r Rule) bound() float64 {
	a := (1 - r.Confidence) / 2
	return math.Log((1 - a) / a)
}

func finite(xs []float64) error {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%g is not a measurement", x)
		}
	}
	return nil
}

// model is the test the rule runs: on a log scale of badness (larger is
// worse), "like good" is mid−delta/2, "like bad" mid+delta/2, with spread
// sigma.
type model struct {
	scale      func(float64) float64 // a metric value to the log scale
	fromScale  func(float64) float64
	mid, delta float64
	sigma      float64
	threshold  float64 // mid as a value of the metric
}

func (r Rule) model(samples []float64) (model, error) {
	var m model
	toBad, fromBad := r.badness()
	var thresholdBad, ref float64
	switch r.Kind {
	case Absolute:
		thresholdBad = toBad(r.Threshold)
		ref = thresholdBad
	case Ratio:
		g := Median(mapped(r.Good, toBad))
		if !(g > 0) || math.IsInf(g, 0) {
			return m, fmt.Errorf("verdict rule: the good endpoint's median is %s: no ratio of it means anything", r.format(Median(r.Good)))
		}
		thresholdBad = g * r.Threshold
		ref = thresholdBad
	case Auto:
		ref = Median(mapped(r.Bad, toBad))
		if !(ref > 0) || math.IsInf(ref, 0) {
			return m, fmt.Errorf("verdict rule: the bad endpoint (median %s) is not worse than the good one (median %s)", r.format(Median(r.Bad)), r.format(Median(r.Good)))
		}
	}
	// Values at or below a hundredth of the threshold (or of the bad
	// endpoint) are all alike: below that, less is not better, and a
	// silent CPU's 0 must not count as infinitely good.
	floor := ref / 100
	m.scale = func(x float64) float64 { return math.Log(math.Min(math.Max(toBad(x), floor), math.MaxFloat64)) }
	m.fromScale = func(y float64) float64 { return fromBad(math.Exp(y)) }

	// The spread is the median absolute deviation from each group's
	// median (scaled to a normal sigma), pooled: spikes do not inflate it.
	spreadOf := func(xs ...[]float64) (float64, int) {
		var devs []float64
		df := 0
		for _, x := range xs {
			if len(x) < 2 {
				continue
			}
			s := mapped(x, m.scale)
			mid := Median(s)
			for _, v := range s {
				devs = append(devs, math.Abs(v-mid))
			}
			df += len(s) - 1
		}
		if df == 0 {
			return 0, 0
		}
		return 1.4826 * Median(devs), df
	}

	if r.Kind == Auto {
		g, b := Median(mapped(r.Good, m.scale)), Median(mapped(r.Bad, m.scale))
		if b <= g {
			return m, fmt.Errorf("verdict rule: the bad endpoint (median %s) is not worse than the good one (median %s)", r.format(Median(r.Bad)), r.format(Median(r.Good)))
		}
		m.mid, m.delta = (g+b)/2, b-g
	} else {
		m.mid, m.delta = math.Log(thresholdBad), 2*indifference
	}
	sigma, df := spreadOf(r.Good, r.Bad)
	if df < 4 {
		// Too few calibration samples: take the kernel's own spread, made
		// larger the fewer samples it rests on.
		own, odf := spreadOf(samples)
		sigma = math.Max(sigma, own*spreadInflation(odf))
	}
	m.sigma = math.Max(sigma, minSpread)
	m.threshold = m.fromScale(m.mid)
	return m, nil
}

// badness maps a metric value to a positive quantity that grows as the
// kernel gets worse, and back: the value itself when higher is worse; the
// share stolen, 100 − x, for availability; the inverse for other metrics
// where lower is worse (a benchmark's operations per second).
func (r Rule) badness() (to, from func(float64) float64) {
	switch {
	case r.HigherIsBad:
		id := func(x float64) float64 { return x }
		return id, id
	case r.MetricKind == KindPercent:
		f := func(x float64) float64 { return 100 - x }
		return f, f
	}
	inv := func(x float64) float64 {
		if x <= 0 {
			return math.Inf(1)
		}
		return 1 / x
	}
	return inv, inv
}

// spreadInflation makes a spread estimated from df degrees of freedom an
// upper bound at 90 %: sqrt(df / chi-square 10th percentile).
func spreadInflation(df int) float64 {
	q10 := []float64{0, 0.0158, 0.2107, 0.5844, 1.0636, 1.6103, 2.2041, 2.8331, 3.4895, 4.1682, 4.8652,
		5.5778, 6.3038, 7.0415, 7.7895, 8.5468, 9.3122, 10.0852, 10.8649, 11.6509, 12.4426}
	if df < 1 {
		return 0
	}
	if df < len(q10) {
		return math.Sqrt(float64(df) / q10[df])
	}
	// Wilson-Hilferty, accurate beyond 20.
	k := float64(df)
	c := 1 - 2/(9*k) - 1.2816*math.Sqrt(2/(9*k))
	return math.Sqrt(k / (k * c * c * c))
}

// format writes a metric value for a reason.
func (r Rule) format(v float64) string {
	return FormatValue(r.MetricKind, v)
}

// FormatValue writes a value of a metric kind with its unit.
func FormatValue(kind string, v float64) string {
	switch kind {
	case KindTime:
		return formatNS(v)
	case KindPercent:
		return fmt.Sprintf("%.3f%%", v)
	}
	return fmt.Sprintf("%.4g", v)
}

// formatNS writes nanoseconds in the unit RT people read and compare
// with their tables: ns below a microsecond, then µs (grouped by
// thousands, decimals only below 100 µs), and seconds from one second.
func formatNS(v float64) string {
	switch a := math.Abs(v); {
	case a < 1e3:
		return fmt.Sprintf("%.0f ns", v)
	case a < 1e4:
		return TrimZeros(fmt.Sprintf("%.2f", v/1e3)) + " µs"
	case a < 1e5:
		return TrimZeros(fmt.Sprintf("%.1f", v/1e3)) + " µs"
	case a < 1e9:
		return groupThousands(math.Round(v/1e3)) + " µs"
	}
	return TrimZeros(fmt.Sprintf("%.2f", v/1e9)) + " s"
}

// TrimZeros drops the zeros after a decimal point, and the point when
// nothing is left after it: "1.50" is "1.5", "2.00" is "2".
func TrimZeros(s string) string {
	for len(s) > 1 && s[len(s)-1] == '0' && strings.Contains(s, ".") {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}

func mapped(xs []float64, f func(float64) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// Median is the median of xs, which it does not modify: the middle
// value, or the one halfway between the two middle ones, interpolated as
// the median aggregate and the percentiles are; NaN when there are none.
// It is kbisect's one median of samples: every verdict, A/B side and
// calibration reason quotes the same number for the same kernel.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return quantile(s, 0.5)
}

// Worse reports whether the median of a is worse than the median of b,
// in the rule's direction.
func (r Rule) Worse(a, b []float64) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	to, _ := r.badness()
	return Median(mapped(a, to)) > Median(mapped(b, to))
}

// Badness maps a value of the rule's metric to a quantity that grows as
// the kernel gets worse (the value itself, the share stolen, or the
// inverse), never below floor: what a noise-robust search compares on a
// log scale.
func (r Rule) Badness(x, floor float64) float64 {
	to, _ := r.badness()
	b := to(x)
	return floored(b, floor)
}

// BadnessOf maps a value as Badness does, under the floor the metric's
// resolution sets (BadnessFloor).
func (r Rule) BadnessOf(x float64) float64 { return r.Badness(x, r.BadnessFloor()) }

// BadnessFloor is the least badness a sample is taken to have, in the
// badness's unit: below what the metric can resolve, so that a quiet
// sample (0 ns of noise, 100 % available) stays on the log scale without
// drowning its kernel's real spread. A time is resolved to 1 ns; a share
// of 100 % stolen to 10⁻⁶ % (the tracer prints five decimals); an
// inverse (a throughput, where lower is worse) is never 0, and is kept as
// small as it is; other numbers to 10⁻³.
func (r Rule) BadnessFloor() float64 {
	switch {
	case r.HigherIsBad && r.MetricKind == KindTime:
		return 1
	case r.MetricKind == KindPercent:
		return 1e-6
	case !r.HigherIsBad:
		return math.SmallestNonzeroFloat64
	}
	return 1e-3
}

// floored is the larger of a badness and its floor; NaN is the floor.
func floored(b, floor float64) float64 {
	if math.IsNaN(b) || b < floor {
		return floor
	}
	return math.Min(b, math.MaxFloat64)
}
