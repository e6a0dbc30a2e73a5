package culprit

import "testing"

// TestBesideSplitsTheCulpritsWithThePendingBoots: with the culprit as
// likely anywhere on a chain, boots that seldom err and every kernel
// built already, a boot
// beside one at a third of it goes to two thirds (three even parts),
// beside one at the middle to a quarter or three quarters, beside two
// at thirds to a sixth, a half or five sixths; never to a commit under
// way while a split tells more.
func TestBesideSplitsTheCulpritsWithThePendingBoots(t *testing.T) {
	const n = 900
	s := quietSearch(t, n, Options{})
	for i := range n {
		s.Built(i)
	}
	for _, c := range []struct {
		pending []int
		want    []int
	}{{[]int{300}, []int{600}}, {[]int{450}, []int{225, 675}}, {[]int{300, 600}, []int{150, 450, 750}}} {
		got, ok := s.Beside(measuring(c.pending...))
		if !ok || got.Kind != Measure {
			t.Fatalf("beside %v: Beside says %+v, %v", c.pending, got, ok)
		}
		near := false
		for _, w := range c.want {
			near = near || abs(got.Commit-w) <= n/50
		}
		if !near {
			t.Errorf("beside %v: Beside boots %d, want near one of %v", c.pending, got.Commit, c.want)
		}
	}
}

// TestBesideWeighsWhatABootCostsAndHowItErrs: a boot of a commit under
// way on another machine, built before, needs no build, and beside a
// boot that errs one time in twenty it tells about a fifth of a bit; a
// new split tells more but waits for its build. With builds as dear as
// five boots of three samples, Beside boots the commit under way again;
// not when it is under way for the first time (its boot would wait for
// its build too); with builds next to free it splits; with boots that
// err less the split wins at the same costs. Beside noisy boots the split sits nearer the middle
// than a third (each boot reads the wrong side less often where its
// side is least known). On a range of three commits with two under way, it
// boots one of them again.
func TestBesideWeighsWhatABootCostsAndHowItErrs(t *testing.T) {
	const n = 900
	dear := newSearch(t, Chain(n), Options{Costs: Costs{Build: 1500, Boot: 120, Sample: 60}})
	if e := dear.bootError(); e < 0.02 || e > 0.1 {
		t.Fatalf("the test model's boots err %.3g of the time, want about 0.05", e)
	}
	if got, ok := dear.Beside(measuring(450)); !ok || got.Commit == 450 {
		t.Errorf("builds of 25 min, 450 under way and not built: Beside boots %+v (%v), want a split", got, ok)
	}
	dear.Built(450)
	if got, ok := dear.Beside(measuring(450)); !ok || got.Commit != 450 {
		t.Errorf("builds of 25 min, 450 under way and built: Beside boots %+v (%v), want commit 450 again", got, ok)
	}
	cheap := newSearch(t, Chain(n), Options{Costs: Costs{Build: 1, Boot: 120, Sample: 60}})
	if got, ok := cheap.Beside(measuring(450)); !ok || (abs(got.Commit-225) > n/10 && abs(got.Commit-675) > n/10) {
		t.Errorf("builds of a second: Beside boots %+v (%v), want about 225 or 675", got, ok)
	}
	sure := quietSearch(t, n, Options{Costs: Costs{Build: 1500, Boot: 120, Sample: 60}})
	if e := sure.bootError(); e > 0.01 {
		t.Fatalf("boots of a quiet model err %.3g of the time, want under 0.01", e)
	}
	sure.Built(450)
	if got, ok := sure.Beside(measuring(450)); !ok || got.Commit == 450 {
		t.Errorf("sure boots, builds of 25 min: Beside boots %+v (%v), want a split, not 450 again", got, ok)
	}
	small := newSearch(t, Chain(3), Options{})
	small.Built(0)
	small.Built(1)
	if got, ok := small.Beside(measuring(0, 1)); !ok || (got.Commit != 0 && got.Commit != 1) {
		t.Errorf("a range of 3 commits with 2 under way: Beside boots %+v (%v), want 0 or 1 again", got, ok)
	}
}

// TestOutcomeEntropyIsWhatTheBootsRead: one boot at the middle of a
// chain reads bad half the time (one bit); two sure boots at thirds read
// three ways, evenly (log2 3); a boot that always errs half the time
// reads one bit whatever it is of.
func TestOutcomeEntropyIsWhatTheBootsRead(t *testing.T) {
	s := newSearch(t, Chain(900), Options{})
	pc, none := s.Probabilities()
	for _, c := range []struct {
		xs   []int
		e    float64
		want float64
	}{{[]int{449}, 0, 1}, {[]int{299, 599}, 0, 1.585}, {[]int{299, 299}, 0, 0.918}, {[]int{100}, 0.5, 1}, {[]int{100, 100}, 0.5, 2}} {
		if got := s.outcomeEntropy(c.xs, pc, none, c.e); got < c.want-0.01 || got > c.want+0.01 {
			t.Errorf("boots of %v erring %g: %.3f bits, want %.3f", c.xs, c.e, got, c.want)
		}
	}
}

// quietSearch is a search of a chain of n commits under a model whose
// boots seldom err.
func quietSearch(t *testing.T, n int, opt Options) *Search {
	t.Helper()
	m := testModel()
	m.BadBoots, m.SpikesGood, m.SpikesBad, m.Spread = 0.001, 0.001, 0.001, 0.05
	s, err := New(Chain(n), m, opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func measuring(commits ...int) []Step {
	var out []Step
	for _, x := range commits {
		out = append(out, Step{Kind: Measure, Commit: x})
	}
	return out
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
