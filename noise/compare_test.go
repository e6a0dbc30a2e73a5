package noise

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// compareBruteU is U of B over A straight from its definition.
func compareBruteU(a, b []float64) float64 {
	var u float64
	for _, y := range b {
		for _, x := range a {
			switch {
			case y > x:
				u++
			case y == x:
				u += 0.5
			}
		}
	}
	return u
}

// comparePermutationP is the two-sided p of U found by relabelling the pooled
// values in all C(n+m, n) ways: min(1, 2·min(#U ≤ u, #U ≥ u)/total).
func comparePermutationP(a, b []float64) float64 {
	pooled := slices.Concat(a, b)
	u := compareBruteU(a, b)
	var le, ge, total int
	for mask := uint(0); mask < 1<<len(pooled); mask++ {
		if bits.OnesCount(mask) != len(a) {
			continue
		}
		var pa, pb []float64
		for i, v := range pooled {
			if mask&(1<<i) != 0 {
				pa = append(pa, v)
			} else {
				pb = append(pb, v)
			}
		}
		switch pu := compareBruteU(pa, pb); {
		case pu < u:
			le++
		case pu > u:
			ge++
		default:
			le++
			ge++
		}
		total++
	}
	return min(1, 2*float64(min(le, ge))/float64(total))
}

// compareRamp returns n values start, start+step, ...
func compareRamp(n int, start, step float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = start + float64(i)*step
	}
	return v
}

// compareDraw returns n values of f.
func compareDraw(n int, f func() float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = f()
	}
	return v
}

// compareHasWarning reports whether one of c's warnings contains every part.
func compareHasWarning(c Comparison, parts ...string) bool {
	for _, w := range c.Warnings {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(w, p)
		}
		if all {
			return true
		}
	}
	return false
}

func TestCompareExactPValueMatchesPermutationCount(t *testing.T) {
	// Complete separation: only 2 of the C(n+m, n) labelings are as extreme.
	for _, tc := range []struct {
		a, b []float64
		want float64
	}{
		{compareRamp(3, 0, 1), compareRamp(3, 10, 1), 0.1},
		{compareRamp(5, 0, 1), compareRamp(5, 10, 1), 2.0 / 252},
		{compareRamp(5, 10, 1), compareRamp(5, 0, 1), 2.0 / 252},
	} {
		c := Compare(tc.a, tc.b, 0.95)
		if !c.Exact || math.Abs(c.P-tc.want) > 1e-15 || math.Abs(comparePermutationP(tc.a, tc.b)-tc.want) > 1e-15 {
			t.Errorf("Compare(%v, %v): P %v (exact %v), permutations %v, want %v", tc.a, tc.b, c.P, c.Exact, comparePermutationP(tc.a, tc.b), tc.want)
		}
	}
	// Every size up to 7 and 7, continuous data (no ties) at several shifts
	// so that the observed U lands anywhere from the tails to the middle.
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 7; n++ {
		for m := 1; m <= 7; m++ {
			for _, shift := range []float64{0, 0.7, 2} {
				a := compareDraw(n, rng.NormFloat64)
				b := compareDraw(m, func() float64 { return rng.NormFloat64() + shift })
				c := Compare(a, b, 0.95)
				want := comparePermutationP(a, b)
				if !c.Exact || c.U != compareBruteU(a, b) || math.Abs(c.P-want) > 1e-12 {
					t.Errorf("%d and %d, shift %v: U %v P %v exact %v, want U %v P %v", n, m, shift, c.U, c.P, c.Exact, compareBruteU(a, b), want)
				}
			}
		}
	}
}

// compareCountsByPlacement counts the labelings by U the slow, independent
// way: place the pooled values in rank order, each either A or B; a B adds
// the number of A already placed to U. Exact in uint64 while C(m+n, m)
// fits.
func compareCountsByPlacement(m, n int) []uint64 {
	// dp[j][u]: labelings of the values so far with j B's and U = u.
	dp := make([][]uint64, n+1)
	for j := range dp {
		dp[j] = make([]uint64, m*n+1)
	}
	dp[0][0] = 1
	for pos := 0; pos < m+n; pos++ {
		for j := min(pos, n-1); j >= 0; j-- {
			as := pos - j // A's placed before this position
			if as > m {
				continue
			}
			for u := m * n; u >= as; u-- {
				dp[j+1][u] += dp[j][u-as]
			}
		}
	}
	return dp[n]
}

func TestCompareExactDistributionMatchesIntegerCounts(t *testing.T) {
	for _, s := range [][2]int{{1, 1}, {2, 3}, {7, 7}, {5, 300}, {1, 2500}, {32, 32}} {
		m, n := s[0], s[1]
		counts := compareCountsByPlacement(m, n)
		var total uint64
		for _, c := range counts {
			total += c
		}
		lower := exactLowerCDF(m, n)
		var cum uint64
		for k, p := range lower {
			cum += counts[k]
			want := float64(cum) / float64(total)
			if math.Abs(p-want) > 1e-12*want {
				t.Fatalf("%d and %d: P(U ≤ %d) = %v, want %d/%d = %v", m, n, k, p, cum, total, want)
			}
		}
	}
}

func TestCompareExactDistributionStaysAccurateAtTheWorkBound(t *testing.T) {
	// 100 and 100: C(200, 100) ≈ 9e58 arrangements, far beyond exact
	// float64 integers; big.Int runs the same product without rounding.
	const m, n = 100, 100
	half := m * n / 2
	c := make([]*big.Int, half+1)
	for k := range c {
		c[k] = new(big.Int)
	}
	c[0].SetInt64(1)
	for i := 1; i <= m; i++ {
		for k := half; k >= n+i; k-- {
			c[k].Sub(c[k], c[k-n-i])
		}
		for k := i; k <= half; k++ {
			c[k].Add(c[k], c[k-i])
		}
	}
	total := new(big.Int).Binomial(m+n, m)
	lower := exactLowerCDF(m, n)
	cum := new(big.Int)
	worst := 0.0
	for k, p := range lower {
		cum.Add(cum, c[k])
		want, _ := new(big.Rat).SetFrac(cum, total).Float64()
		worst = max(worst, math.Abs(p-want)/want)
	}
	if worst > 1e-12 {
		t.Errorf("largest relative error of P(U ≤ k) at 100 and 100: %v", worst)
	}
}

func TestCompareIsSymmetricInAAndB(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		name string
		a, b []float64
	}{
		{"exact", compareDraw(9, rng.NormFloat64), compareDraw(7, func() float64 { return rng.NormFloat64() + 1 })},
		{"ties", []float64{1, 2, 2, 3, 5}, []float64{2, 3, 3, 4}},
		{"normal approximation", compareDraw(150, rng.ExpFloat64), compareDraw(120, func() float64 { return rng.ExpFloat64() + 0.2 })},
		{"too few", compareRamp(3, 0, 1), compareRamp(3, 10, 1)},
		{"even pairs", compareRamp(4, 0, 1.5), compareRamp(6, 1, 0.7)},
	} {
		ab, ba := Compare(tc.a, tc.b, 0.95), Compare(tc.b, tc.a, 0.95)
		mn := float64(ab.NA * ab.NB)
		if ab.P != ba.P || ab.Exact != ba.Exact || ab.U != mn-ba.U ||
			ab.Shift != -ba.Shift || ab.ShiftLow != -ba.ShiftHigh || ab.ShiftHigh != -ba.ShiftLow {
			t.Errorf("%s: A,B gives %+v\nB,A gives %+v", tc.name, ab, ba)
		}
	}
}

func TestCompareShiftIntervalUsesTheTabulatedCriticalValues(t *testing.T) {
	// Two-sided 5% critical values of U from the published tables: reject
	// when U ≤ crit, so the interval starts at the (crit+1)-th difference.
	for _, tc := range []struct{ n, crit int }{{5, 2}, {6, 5}, {7, 8}, {8, 13}, {10, 23}, {20, 127}} {
		null := newUNull(tc.n, tc.n, rankSummary{})
		if k := null.intervalRank(0.95); !null.exact || k != tc.crit+1 {
			t.Errorf("%d and %d: interval rank %d (exact %v), want %d", tc.n, tc.n, k, null.exact, tc.crit+1)
		}
	}
	// Compare picks those order statistics of the sorted differences.
	rng := rand.New(rand.NewPCG(5, 6))
	a, b := compareDraw(10, rng.NormFloat64), compareDraw(10, rng.NormFloat64)
	var d []float64
	for _, y := range b {
		for _, x := range a {
			d = append(d, y-x)
		}
	}
	slices.Sort(d)
	c := Compare(a, b, 0.95)
	if c.ShiftLow != d[23] || c.ShiftHigh != d[76] || c.Shift != d[49]/2+d[50]/2 {
		t.Errorf("interval [%v, %v] shift %v, want [%v, %v] shift %v", c.ShiftLow, c.ShiftHigh, c.Shift, d[23], d[76], (d[49]+d[50])/2)
	}
}

func TestCompareShiftIntervalCoversTheTrueShiftAtTheNominalRate(t *testing.T) {
	const trials = 2000
	rng := rand.New(rand.NewPCG(7, 8))
	normal := rng.NormFloat64
	heavy := func() float64 { return math.Exp(rng.NormFloat64()) }
	// Latencies in whole µs: ties everywhere.
	roundedHeavy := func() float64 { return math.Round(10 * math.Exp(rng.NormFloat64())) }
	for _, tc := range []struct {
		name        string
		na, nb      int
		compareDraw func() float64
		shift       float64
		confidence  float64
		exact       bool
		lo, hi      float64
	}{
		{"normal 10 and 10", 10, 10, normal, 1, 0.95, true, 0.92, 0.98},
		{"lognormal 8 and 12", 8, 12, heavy, 0.5, 0.95, true, 0.92, 0.98},
		{"lognormal 10 and 10 at 90%", 10, 10, heavy, 2, 0.90, true, 0.87, 0.93},
		{"normal 101 and 101", 101, 101, normal, 0.3, 0.95, false, 0.92, 0.98},
		{"lognormal 110 and 100", 110, 100, heavy, 0.2, 0.95, false, 0.92, 0.98},
		{"rounded lognormal 15 and 15", 15, 15, roundedHeavy, 3, 0.95, false, 0.92, 0.98},
	} {
		covered := 0
		for range trials {
			a := compareDraw(tc.na, tc.compareDraw)
			b := compareDraw(tc.nb, func() float64 { return tc.compareDraw() + tc.shift })
			c := Compare(a, b, tc.confidence)
			if c.Exact != tc.exact {
				t.Fatalf("%s: Exact %v, want %v", tc.name, c.Exact, tc.exact)
			}
			if c.ShiftLow <= tc.shift && tc.shift <= c.ShiftHigh {
				covered++
			}
		}
		share := float64(covered) / trials
		t.Logf("%s: the %g%% interval covered the shift in %d of %d trials (%.3f)", tc.name, 100*tc.confidence, covered, trials, share)
		if share < tc.lo || share > tc.hi {
			t.Errorf("%s: coverage %.3f outside [%v, %v]", tc.name, share, tc.lo, tc.hi)
		}
	}
}

func TestCompareNormalApproximationAgreesWithExactPAt20And20(t *testing.T) {
	exact := newUNull(20, 20, rankSummary{})
	approx := newUNull(20, 20, rankSummary{tied: 1}) // forces the approximation; no tie terms
	if !exact.exact || approx.exact {
		t.Fatal("wrong null distributions picked")
	}
	worst := 0.0
	for u := 0; u <= 400; u++ {
		worst = max(worst, math.Abs(exact.twoSidedP(float64(u))-approx.twoSidedP(float64(u))))
	}
	t.Logf("largest |exact p − normal p| over U = 0..400: %.4f", worst)
	if worst > 0.005 {
		t.Errorf("normal approximation off by %v", worst)
	}
	if ke, ka := exact.intervalRank(0.95), approx.intervalRank(0.95); ke != ka {
		t.Errorf("interval ranks differ: exact %d, normal %d", ke, ka)
	}
}

func TestCompareWithTiesUsesTheTieCorrectedNormalApproximation(t *testing.T) {
	// Pooled 1 2 2 2 3 3 3 4: two groups of three ties, Σ(t³−t) = 48,
	// U = 13 of 16, Var U = 16/12·(9 − 48/56), z = (5 − 0.5)/√Var.
	c := Compare([]float64{1, 2, 2, 3}, []float64{2, 3, 3, 4}, 0.95)
	// Differences: -1 once, 0 four times, 1 six, 2 four, 3 once; the
	// normal rank is ⌊8.5 − 1.96·3.295⌋ = 2.
	if c.Exact || c.U != 13 || math.Abs(c.P-0.17203370892182296) > 1e-12 ||
		c.Shift != 1 || c.ShiftLow != 0 || c.ShiftHigh != 2 || c.Significant() {
		t.Errorf("got %+v", c)
	}
	if len(c.Warnings) != 1 || !compareHasWarning(c, "6 of the 8 values are tied") {
		t.Errorf("warnings %q", c.Warnings)
	}
	// Ties within one sample only still make the pooled sample tied.
	if c := Compare([]float64{1, 1, 2}, []float64{3, 4, 5}, 0.95); c.Exact || !compareHasWarning(c, "tied") {
		t.Errorf("ties inside A: %+v", c)
	}
}

func TestCompareCompleteSeparationOfThreeAndThreeCannotReach95Percent(t *testing.T) {
	c := Compare([]float64{1, 2, 3}, []float64{11, 12, 13}, 0.95)
	if !c.Exact || c.P != 0.1 || c.Significant() || c.U != 9 {
		t.Errorf("got %+v", c)
	}
	if !compareHasWarning(c, "smallest two-sided p is 0.1", "95%") || !compareHasWarning(c, "widest possible", "0.9") {
		t.Errorf("warnings %q", c.Warnings)
	}
	if c.ShiftLow != 8 || c.ShiftHigh != 12 || c.Shift != 10 {
		t.Errorf("shift %v in [%v, %v], want 10 in [8, 12]", c.Shift, c.ShiftLow, c.ShiftHigh)
	}
	// At 90% the widest interval has exactly the coverage asked, but P =
	// 0.1 is still not below 0.1.
	c = Compare([]float64{1, 2, 3}, []float64{11, 12, 13}, 0.90)
	if c.Significant() || compareHasWarning(c, "widest") || !compareHasWarning(c, "smallest two-sided p is 0.1") {
		t.Errorf("at 90%%: %+v", c)
	}
	// 5 and 5 separate at 95%: P = 2/252 and a proper interval.
	c = Compare(compareRamp(5, 0, 1), compareRamp(5, 10, 1), 0.95)
	if !c.Significant() || len(c.Warnings) != 0 || c.ShiftLow != 7 || c.ShiftHigh != 13 {
		t.Errorf("5 and 5: %+v", c)
	}
}

func TestCompareHandlesDegenerateInputsWithoutNaN(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name       string
		a, b       []float64
		confidence float64
		want       Comparison // checked: NA, NB, medians, U, P, shift and interval, Exact
		warnings   [][]string
	}{
		{"all equal", []float64{4, 4, 4}, []float64{4, 4}, 0.95,
			Comparison{NA: 3, NB: 2, MedianA: 4, MedianB: 4, U: 3, P: 1},
			[][]string{{"all 5 values are equal"}}},
		{"A empty", nil, []float64{1, 2}, 0.95,
			Comparison{NB: 2, MedianB: 1.5, P: 1},
			[][]string{{"nothing to compare", "A has 0"}}},
		{"both empty", []float64{}, nil, 0.95, Comparison{P: 1}, [][]string{{"nothing to compare"}}},
		{"only NaN in B", []float64{1, 2}, []float64{math.NaN(), -inf}, 0.95,
			Comparison{NA: 2, MedianA: 1.5, P: 1},
			[][]string{{"dropped 2 NaN/Inf", "B"}, {"nothing to compare"}}},
		{"one and one", []float64{1}, []float64{2}, 0.95,
			Comparison{NA: 1, NB: 1, MedianA: 1, MedianB: 2, U: 1, P: 1, Exact: true, Shift: 1, ShiftLow: 1, ShiftHigh: 1},
			[][]string{{"smallest two-sided p is 1"}, {"widest possible"}}},
		{"overflowing differences", []float64{-1e308, 0}, []float64{1e308, 1}, 0.95,
			Comparison{NA: 2, NB: 2, MedianA: -5e307, MedianB: 5e307, U: 4, P: 1.0 / 3, Exact: true},
			[][]string{{"smallest two-sided p is 0.333"}, {"overflow"}}},
		{"bad confidence", compareRamp(5, 0, 1), compareRamp(5, 10, 1), 95,
			Comparison{NA: 5, NB: 5, MedianA: 2, MedianB: 12, U: 25, P: 2.0 / 252, Exact: true, Shift: 10, ShiftLow: 7, ShiftHigh: 13},
			[][]string{{"confidence 95 is outside", "0.95 used"}}},
		{"NaN confidence", compareRamp(5, 0, 1), compareRamp(5, 10, 1), math.NaN(),
			Comparison{NA: 5, NB: 5, MedianA: 2, MedianB: 12, U: 25, P: 2.0 / 252, Exact: true, Shift: 10, ShiftLow: 7, ShiftHigh: 13},
			[][]string{{"confidence NaN is outside"}}},
	} {
		c := Compare(tc.a, tc.b, tc.confidence)
		got := c
		got.Warnings, got.Confidence = nil, 0
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: got  %+v\nwant %+v", tc.name, got, tc.want)
		}
		if c.Confidence != 0.95 {
			t.Errorf("%s: confidence %v", tc.name, c.Confidence)
		}
		if len(c.Warnings) != len(tc.warnings) {
			t.Errorf("%s: warnings %q", tc.name, c.Warnings)
		}
		for _, w := range tc.warnings {
			if !compareHasWarning(c, w...) {
				t.Errorf("%s: no warning with %q in %q", tc.name, w, c.Warnings)
			}
		}
		if _, err := json.Marshal(c); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestCompareDropsNaNAndInfAndLeavesTheInputsAlone(t *testing.T) {
	a := []float64{3, math.NaN(), 1, 2, math.Inf(1)}
	b := []float64{math.Inf(-1), 12, 11, 13}
	c := Compare(a, b, 0.95)
	clean := Compare([]float64{1, 2, 3}, []float64{11, 12, 13}, 0.95)
	if c.P != clean.P || c.U != clean.U || c.Shift != clean.Shift || c.NA != 3 || c.NB != 3 {
		t.Errorf("got %+v, want the numbers of %+v", c, clean)
	}
	if !compareHasWarning(c, "dropped 2 NaN/Inf value(s) from A") || !compareHasWarning(c, "dropped 1 NaN/Inf value(s) from B") {
		t.Errorf("warnings %q", c.Warnings)
	}
	if a[0] != 3 || !math.IsNaN(a[1]) || b[1] != 12 {
		t.Errorf("inputs modified: %v %v", a, b)
	}
	if _, err := json.Marshal(c); err != nil {
		t.Error(err)
	}
}

func TestCompareJSONUsesSnakeCase(t *testing.T) {
	out, err := json.Marshal(Compare([]float64{1, 2, 3}, []float64{4, 5, 7}, 0.95))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"n_a", "n_b", "median_a", "median_b", "u", "p", "exact", "shift", "shift_low", "shift_high", "confidence", "warnings"} {
		if !strings.Contains(string(out), `"`+key+`":`) {
			t.Errorf("no %q in %s", key, out)
		}
	}
}

func TestCompareSignificantComparesPWithOneMinusConfidence(t *testing.T) {
	for _, tc := range []struct {
		p, confidence float64
		want          bool
	}{{0.049, 0.95, true}, {0.05, 0.95, false}, {0.2, 0.9, false}, {0.009, 0.99, true}} {
		if got := (Comparison{P: tc.p, Confidence: tc.confidence}).Significant(); got != tc.want {
			t.Errorf("P %v at %v: %v", tc.p, tc.confidence, got)
		}
	}
	// 1 value below 39: P = 2/40 = 0.05 exactly, not below 1 − 0.95 even
	// though that rounds to 0.050000000000000044; the widest interval
	// reaches exactly 95%.
	c := Compare([]float64{0}, compareRamp(39, 1, 1), 0.95)
	if c.P != 0.05 || c.Significant() || !compareHasWarning(c, "smallest two-sided p is 0.05") || compareHasWarning(c, "widest") {
		t.Errorf("1 and 39: %+v", c)
	}
}

func TestCompareAboveTheSortCapAgreesWithSorting(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	a := compareDraw(1001, func() float64 { return math.Round(100 * rng.ExpFloat64()) })
	b := compareDraw(1000, func() float64 { return math.Round(100*rng.ExpFloat64()) + 7 })
	c := Compare(a, b, 0.99)
	mn := len(a) * len(b)
	if mn <= compareSortMaxPairs {
		t.Fatalf("%d pairs do not exercise the fallback", mn)
	}
	d := make([]float64, 0, mn)
	for _, y := range b {
		for _, x := range a {
			d = append(d, y-x)
		}
	}
	slices.Sort(d)
	r := summarizeRanks(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
	k := newUNull(len(a), len(b), r).intervalRank(0.99)
	if c.Shift != d[mn/2-1]/2+d[mn/2]/2 || c.ShiftLow != d[k-1] || c.ShiftHigh != d[mn-k] {
		t.Errorf("shift %v in [%v, %v], want %v in [%v, %v] (k = %d)", c.Shift, c.ShiftLow, c.ShiftHigh, d[mn/2-1]/2+d[mn/2]/2, d[k-1], d[mn-k], k)
	}
	t.Logf("%d pairs: shift %v in [%v, %v], P %.3g", mn, c.Shift, c.ShiftLow, c.ShiftHigh, c.P)
}

func TestComparePairwiseSelectionWithoutSortingMatchesSorting(t *testing.T) {
	// Above compareSortMaxPairs the order statistics come from bisection;
	// check it against sorting on data with ties, negatives and zeros.
	rng := rand.New(rand.NewPCG(9, 10))
	xs := compareDraw(23, func() float64 { return math.Round(4*rng.NormFloat64()) / 2 })
	ys := compareDraw(17, func() float64 { return math.Round(6*rng.NormFloat64())/3 + 0.25 })
	xs = append(xs, 0, math.Copysign(0, -1), 1e300, -1e-300)
	slices.Sort(xs)
	slices.Sort(ys)
	var d []float64
	for _, y := range ys {
		for _, x := range xs {
			d = append(d, y-x)
		}
	}
	slices.Sort(d)
	for r := 1; r <= len(d); r++ {
		if got := selectPairwiseDiff(xs, ys, r); got != d[r-1] {
			t.Fatalf("rank %d: %v, want %v", r, got, d[r-1])
		}
	}
}

func BenchmarkCompare(b *testing.B) {
	for _, n := range []int{10, 100} {
		rng := rand.New(rand.NewPCG(11, uint64(n)))
		xs := compareDraw(n, rng.NormFloat64)
		ys := compareDraw(n, func() float64 { return rng.NormFloat64() + 0.5 })
		b.Run(fmt.Sprintf("n=m=%d", n), func(b *testing.B) {
			for b.Loop() {
				Compare(xs, ys, 0.95)
			}
		})
	}
}
