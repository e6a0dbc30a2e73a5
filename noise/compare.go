package noise

import (
	"fmt"
	"math"
	"slices"
)

const (
	// compareExactMaxWork bounds min(NA,NB)·NA·NB, the number of additions
	// the exact null distribution of U costs (about 1 ms at the bound, on at
	// most NA·NB/2 float64): every design up to 100 and 100, and lopsided
	// ones up to 10 and 10 000. The bound is on work, not on NA·NB, because
	// the normal approximation is worst for lopsided designs, the cheapest
	// to do exactly: against the exact p it is off by up to 0.004 at 20 and
	// 20, 0.0008 at 100 and 100, but 0.02 at 3 and 800 and 0.11 at 1 and
	// 2500, where U is uniform and a 95% interval exists only exactly.
	compareExactMaxWork = 1_000_000
	// compareSortMaxPairs bounds the pairwise differences that are
	// materialised and sorted (8 MB of float64). Above it the order
	// statistics are found by bisection over the values, counting the
	// differences below a candidate in O(NA+NB): exact, only slower per
	// order statistic.
	compareSortMaxPairs = 1_000_000
	// compareDefaultConfidence replaces a confidence outside (0.5, 1).
	compareDefaultConfidence = 0.95
)

// Comparison is the statistical comparison of two independent samples A and
// B (e.g. the per-sample worst-CPU max noise of two kernels): a Mann-Whitney
// (Wilcoxon rank-sum) test and the Hodges-Lehmann estimate of the shift from
// A to B. It never holds NaN or Inf, so it always encodes as JSON.
type Comparison struct {
	// NA and NB are the numbers of finite values used from A and B.
	NA int `json:"n_a"`
	NB int `json:"n_b"`
	// MedianA and MedianB are the sample medians (0 for an empty side).
	MedianA float64 `json:"median_a"`
	MedianB float64 `json:"median_b"`
	// U is the Mann-Whitney statistic of B over A: the number of pairs
	// (a, b) with b > a, ties counting 1/2. It runs from 0 to NA*NB.
	U float64 `json:"u"`
	// P is the two-sided p-value of "A and B come from the same
	// distribution".
	P float64 `json:"p"`
	// Exact says P comes from the exact distribution of U (no ties, NA*NB
	// small enough: min(NA,NB)·NA·NB ≤ 1e6, e.g. up to 100 and 100), not
	// the normal approximation.
	Exact bool `json:"exact"`
	// Shift is the Hodges-Lehmann estimate of the shift B − A (the median
	// of all pairwise differences b − a).
	Shift float64 `json:"shift"`
	// ShiftLow and ShiftHigh bound Shift at Confidence: the
	// distribution-free interval from the order statistics of the pairwise
	// differences, exact where P is exact, from the normal approximation
	// otherwise.
	ShiftLow  float64 `json:"shift_low"`
	ShiftHigh float64 `json:"shift_high"`
	// Confidence is the confidence level used for Significant and the
	// interval.
	Confidence float64 `json:"confidence"`
	// Warnings say what limits the result: too few samples for the
	// confidence asked, ties, empty input, NaN/Inf values dropped.
	Warnings []string `json:"warnings,omitempty"`
}

// Significant reports whether P < 1 - Confidence, i.e. whether A and B
// differ at the confidence of the comparison. The comparison allows for the
// rounding of 1 - Confidence (0.050000000000000044 for 0.95), so that an
// exact P of 0.05, e.g. 1 value against 39 all above it, is not
// significant at 95%.
func (c Comparison) Significant() bool {
	return below(c.P, 1-c.Confidence)
}

// Compare compares A and B at the given confidence (0.5 < confidence < 1;
// anything else is replaced by 0.95 with a warning). NaN and ±Inf values are
// dropped with a warning; the inputs are not modified. Without ties and for
// min(NA,NB)·NA·NB ≤ 1e6, P and the shift interval are exact; otherwise they
// use the normal approximation of U with tie and continuity corrections.
func Compare(a, b []float64, confidence float64) Comparison {
	c := Comparison{Confidence: confidence, P: 1}
	if !(confidence > 0.5 && confidence < 1) {
		c.Confidence = compareDefaultConfidence
		c.warn("confidence %v is outside (0.5, 1): %g used instead", confidence, compareDefaultConfidence)
	}
	xs := c.finiteSorted(a, "A")
	ys := c.finiteSorted(b, "B")
	c.NA, c.NB = len(xs), len(ys)
	// A side without values keeps the median 0: JSON has no NaN.
	if c.NA > 0 {
		c.MedianA = Median(xs)
	}
	if c.NB > 0 {
		c.MedianB = Median(ys)
	}
	if c.NA == 0 || c.NB == 0 {
		c.warn("nothing to compare: A has %d values and B has %d", c.NA, c.NB)
		return c
	}
	r := summarizeRanks(xs, ys)
	c.U = r.u
	if xs[0] == xs[c.NA-1] && xs[0] == ys[0] && ys[0] == ys[c.NB-1] {
		c.warn("all %d values are equal: A and B cannot be told apart", c.NA+c.NB)
		return c
	}
	null := newUNull(c.NA, c.NB, r)
	c.Exact = null.exact
	c.P = null.twoSidedP(r.u)
	if r.tied > 0 {
		c.warn("%d of the %d values are tied: P and the interval use the normal approximation with tie correction", r.tied, c.NA+c.NB)
	}
	c.warnIfUnreachable(null)
	c.estimateShift(xs, ys, null)
	return c
}

// warn appends a formatted warning.
func (c *Comparison) warn(format string, args ...any) {
	c.Warnings = append(c.Warnings, fmt.Sprintf(format, args...))
}

// finiteSorted returns a sorted copy of the finite values of v and warns
// about the others: a NaN would poison every rank and difference.
func (c *Comparison) finiteSorted(v []float64, name string) []float64 {
	out := make([]float64, 0, len(v))
	for _, x := range v {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			out = append(out, x)
		}
	}
	if dropped := len(v) - len(out); dropped > 0 {
		c.warn("dropped %d NaN/Inf value(s) from %s", dropped, name)
	}
	slices.Sort(out)
	return out
}

// warnIfUnreachable says when even complete separation could not be
// significant at c.Confidence: the smallest two-sided p is that of U = 0.
func (c *Comparison) warnIfUnreachable(null uNull) {
	alpha := 1 - c.Confidence
	if minP := null.twoSidedP(0); !below(minP, alpha) {
		c.warn("too few samples: with %d and %d values the smallest two-sided p is %.3g, so %.4g%% confidence can never be reached",
			c.NA, c.NB, minP, 100*c.Confidence)
	}
}

// estimateShift sets the Hodges-Lehmann shift and its interval
// [d(k), d(NA*NB+1-k)], d being the sorted differences b − a and k the rank
// null.intervalRank gives. When no k ≥ 1 reaches the confidence it falls
// back to the widest interval, [min d, max d], and says what that covers.
func (c *Comparison) estimateShift(xs, ys []float64, null uNull) {
	// The extreme differences are the first and last; if neither
	// overflows, none does, and Inf − Inf can never make a NaN shift.
	if math.IsInf(ys[0]-xs[len(xs)-1], 0) || math.IsInf(ys[len(ys)-1]-xs[0], 0) {
		c.warn("values too large: differences b − a overflow float64, so no shift is estimated")
		return
	}
	mn := len(xs) * len(ys)
	k := null.intervalRank(c.Confidence)
	widest := k < 1
	if widest {
		k = 1
	}
	// Ranks (1-based): the interval ends and the one or two middle ranks.
	ranks := []int{k, mn + 1 - k, (mn + 1) / 2, mn/2 + 1}
	d := pairwiseOrderStats(xs, ys, ranks)
	c.ShiftLow, c.ShiftHigh = d[0], d[1]
	c.Shift = d[2]
	if mn%2 == 0 {
		// Halves first: the sum of two huge differences could overflow.
		c.Shift = d[2]/2 + d[3]/2
	}
	if widest {
		c.warn("the shift interval is the widest possible (smallest to largest difference) and covers the true shift with probability %.3g only, not %.4g%%",
			1-null.twoSidedP(0), 100*c.Confidence)
	}
}

// rankSummary is what the test needs from the ranks of the pooled sample.
type rankSummary struct {
	u      float64 // Mann-Whitney U of B over A
	tieSum float64 // Σ(t³ − t) over the groups of t tied pooled values
	tied   int     // pooled values that share their value with another
}

// summarizeRanks computes U and the tie terms from sorted xs (A) and ys (B)
// by merging, in O(NA+NB).
func summarizeRanks(xs, ys []float64) rankSummary {
	var r rankSummary
	lt, le := 0, 0 // xs[:lt] < y, xs[:le] ≤ y
	for _, y := range ys {
		for lt < len(xs) && xs[lt] < y {
			lt++
		}
		le = max(le, lt)
		for le < len(xs) && xs[le] <= y {
			le++
		}
		r.u += float64(lt) + float64(le-lt)/2
	}
	i, j := 0, 0
	for i < len(xs) || j < len(ys) {
		v := math.Inf(1)
		if i < len(xs) {
			v = xs[i]
		}
		if j < len(ys) {
			v = min(v, ys[j])
		}
		t := 0
		for ; i < len(xs) && xs[i] == v; i++ {
			t++
		}
		for ; j < len(ys) && ys[j] == v; j++ {
			t++
		}
		if t > 1 {
			ft := float64(t)
			r.tieSum += ft*ft*ft - ft
			r.tied += t
		}
	}
	return r
}

// uNull is the distribution of U under "same distribution" for sample sizes
// m and n: exact (no ties, m*n small) or normal.
type uNull struct {
	m, n  int
	exact bool
	// lower[k] is P(U ≤ k) for k = 0..⌊mn/2⌋ when exact. The distribution
	// is symmetric about mn/2, so the lower half gives every tail.
	lower []float64
	// sd is the tie-corrected standard deviation of U when not exact.
	sd float64
}

// newUNull picks the exact distribution when there are no ties and
// min(m,n)·m·n ≤ compareExactMaxWork, and the normal approximation
// otherwise.
func newUNull(m, n int, r rankSummary) uNull {
	d := uNull{m: m, n: n}
	// In float64: the int product of two huge sizes could wrap around.
	work := float64(min(m, n)) * float64(m) * float64(n)
	if r.tied == 0 && work <= compareExactMaxWork {
		d.exact = true
		d.lower = exactLowerCDF(m, n)
		return d
	}
	// Var U = mn/12 · ((N+1) − Σ(t³−t)/(N(N−1))); it is 0 only when all
	// values are tied, which Compare handles before.
	pooled := float64(m + n)
	v := float64(m) * float64(n) / 12 * ((pooled + 1) - r.tieSum/(pooled*(pooled-1)))
	d.sd = math.Sqrt(max(v, 0))
	return d
}

// mean is E[U] = mn/2.
func (d uNull) mean() float64 {
	return float64(d.m) * float64(d.n) / 2
}

// twoSidedP is min(1, 2·min(P(U ≤ u), P(U ≥ u))), from the exact counts or
// from the normal approximation with continuity correction 1/2.
func (d uNull) twoSidedP(u float64) float64 {
	if d.exact {
		// Without ties U is an integer; P(U ≥ k) = P(U ≤ mn−k) by symmetry,
		// and the smaller tail is the one on the near side of mn/2.
		k := int(math.Round(u))
		k = min(k, d.m*d.n-k)
		return min(1, 2*d.lower[k])
	}
	if d.sd == 0 {
		return 1
	}
	z := max(0, math.Abs(u-d.mean())-0.5) / d.sd
	return min(1, math.Erfc(z/math.Sqrt2))
}

// intervalRank is the largest k ≥ 1 with 2·P(U ≤ k−1) ≤ 1 − confidence, or 0
// when even k = 1 does not reach the confidence. [d(k), d(mn+1−k)] then
// covers the true shift with probability 1 − 2·P(U ≤ k−1) (Lehmann): the
// shift lies below d(k) exactly when U of the shifted-back samples is at
// most k−1.
func (d uNull) intervalRank(confidence float64) int {
	alpha := 1 - confidence
	if d.exact {
		k := 0
		for j := 0; j < len(d.lower) && atMost(2*d.lower[j], alpha); j++ {
			k = j + 1
		}
		return k
	}
	// With continuity correction P(U ≤ k−1) ≈ Φ((k − 1/2 − mn/2)/sd), so
	// k ≤ mn/2 + 1/2 − z·sd with z the two-sided normal quantile.
	z := math.Sqrt2 * math.Erfinv(confidence)
	k := math.Floor(d.mean() + 0.5 - z*d.sd)
	return int(max(0, min(k, float64((d.m*d.n+1)/2))))
}

// compareRounding is the relative slack for comparing a probability with
// 1 − confidence: both carry float64 rounding, and a p equal to alpha in
// exact arithmetic must compare as equal.
const compareRounding = 1e-9

// atMost is p ≤ alpha allowing for rounding, so that 3 and 3 samples do
// reach 90% (2/20 against 1 − 0.9 = 0.09999999999999998).
func atMost(p, alpha float64) bool {
	return p <= alpha*(1+compareRounding)
}

// below is p < alpha allowing for rounding: p must be clearly below.
func below(p, alpha float64) bool {
	return p < alpha*(1-compareRounding)
}

// exactLowerCDF returns P(U ≤ k) for k = 0..⌊mn/2⌋ without ties. The number
// of arrangements with U = k is the coefficient of q^k of the Gaussian
// binomial [m+n choose m]_q = Π_{i=1..s} (1 − q^{l+i})/(1 − q^i), with
// s = min(m,n) and l = max(m,n). Each factor is one pass of a subtraction
// and one of running sums with stride i over an array of ⌊mn/2⌋+1 float64
// counts: O(s·mn) time, O(mn) memory. Coefficient k only depends on lower
// coefficients, so the array can stop at the middle. After factor i the
// array counts partitions of k into at most i parts no larger than l, never
// more than the final count at the same k (and the subtraction's operands
// are such counts too), so tail counts below 2^53 stay exact integers and
// larger ones carry only float64 rounding (checked against big.Int at 100
// and 100).
func exactLowerCDF(m, n int) []float64 {
	s, l := min(m, n), max(m, n)
	half := m * n / 2
	c := make([]float64, half+1)
	c[0] = 1
	for i := 1; i <= s; i++ {
		for k := half; k >= l+i; k-- {
			c[k] -= c[k-l-i]
		}
		for k := i; k <= half; k++ {
			c[k] += c[k-i]
		}
	}
	// The total, C(m+n, m), is twice the lower half less the middle
	// coefficient when mn is even; summing the counts keeps Σ P = 1.
	var sum float64
	for k := range c {
		sum += c[k]
	}
	total := 2 * sum
	if m*n%2 == 0 {
		total -= c[half]
	}
	var cum float64
	for k := range c {
		cum += c[k]
		c[k] = cum / total
	}
	return c
}

// pairwiseOrderStats returns the given order statistics (1-based ranks) of
// the differences y − x over all pairs of sorted xs and ys.
func pairwiseOrderStats(xs, ys []float64, ranks []int) []float64 {
	out := make([]float64, len(ranks))
	if len(xs)*len(ys) <= compareSortMaxPairs {
		d := make([]float64, 0, len(xs)*len(ys))
		for _, y := range ys {
			for _, x := range xs {
				d = append(d, y-x)
			}
		}
		slices.Sort(d)
		for i, r := range ranks {
			out[i] = d[r-1]
		}
		return out
	}
	for i, r := range ranks {
		out[i] = selectPairwiseDiff(xs, ys, r)
	}
	return out
}

// selectPairwiseDiff returns the r-th smallest difference y − x without
// materialising the pairs: it bisects over the float64 values between the
// smallest and the largest difference, in their order as integers, for the
// smallest t with at least r differences ≤ t. That t is one of the
// differences, found in at most 64 counts of O(len(xs)+len(ys)).
func selectPairwiseDiff(xs, ys []float64, r int) float64 {
	lo := orderedKey(ys[0] - xs[len(xs)-1])
	hi := orderedKey(ys[len(ys)-1] - xs[0])
	for lo < hi {
		mid := lo + (hi-lo)/2
		if countDiffsAtMost(xs, ys, fromOrderedKey(mid)) >= r {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return fromOrderedKey(lo)
}

// countDiffsAtMost counts the pairs with y − x ≤ t. For sorted inputs the
// first x with y − x ≤ t only moves right as y grows (rounded subtraction is
// monotone too), so one sweep does.
func countDiffsAtMost(xs, ys []float64, t float64) int {
	count, i := 0, 0
	for _, y := range ys {
		for i < len(xs) && y-xs[i] > t {
			i++
		}
		count += len(xs) - i
	}
	return count
}

// orderedKey maps a float64 to a uint64 in the same order (for non-NaN
// values), so that bisection over keys visits every float64 in between.
func orderedKey(f float64) uint64 {
	b := math.Float64bits(f)
	if b>>63 == 1 {
		return ^b
	}
	return b | 1<<63
}

// fromOrderedKey inverts orderedKey.
func fromOrderedKey(k uint64) float64 {
	if k>>63 == 1 {
		return math.Float64frombits(k &^ (1 << 63))
	}
	return math.Float64frombits(^k)
}
