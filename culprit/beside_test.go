package culprit

import "testing"

// TestBesideSplitsTheCulpritsWithThePendingBoots: with the culprit as
// likely anywhere on a chain, a boot beside one at a third of it goes
// to two thirds (three even parts), beside one at the middle to a
// quarter or three quarters; never to a commit under way; and none when
// every commit that could tell more is under way.
func TestBesideSplitsTheCulpritsWithThePendingBoots(t *testing.T) {
	const n = 900
	s := newSearch(t, Chain(n), Options{})
	for _, c := range []struct {
		pending []int
		want    []int
	}{{[]int{300}, []int{600}}, {[]int{450}, []int{225, 675}}, {[]int{300, 600}, []int{150, 450, 750}}} {
		var pending []Step
		for _, x := range c.pending {
			pending = append(pending, Step{Kind: Measure, Commit: x})
		}
		got, ok := s.Beside(pending)
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
	small := newSearch(t, Chain(3), Options{})
	if got, ok := small.Beside([]Step{{Kind: Measure, Commit: 0}, {Kind: Measure, Commit: 1}}); ok {
		t.Errorf("a range of 3 commits with 2 under way: Beside boots %+v", got)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
