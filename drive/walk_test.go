package drive

import (
	"context"
	"errors"
	"math"
	"testing"

	"kbisect/culprit"
)

// walkLine is a line of n commits (0 the oldest, n-1 the bad endpoint)
// with older releases below the good endpoint given: the range searched
// is (base, n-1], base the given good endpoint until the walk finds a
// release. A culprit below the given good endpoint makes it bad.
type walkLine struct {
	n, given int
	releases []int
	base     int
	tried    []bool
}

// pos is where a kernel lies on the line.
func (w *walkLine) pos(k Kernel) int {
	switch k.Commit {
	case BadEndpoint:
		return w.n - 1
	case culprit.GoodEndpoint:
		return w.base
	case Older:
		return w.releases[k.Release]
	}
	return w.base + 1 + k.Commit
}

func (w *walkLine) bad(k Kernel, c int) bool {
	if k.Reverted {
		return w.pos(k) != c
	}
	return w.pos(k) >= c
}

func (w *walkLine) options(l *lineLab, hist []Record) Options {
	opt := options(l, hist)
	opt.Range = func() (*culprit.DAG, error) { return culprit.Chain(w.n - 1 - w.base), nil }
	opt.Walk = &Walk{
		Releases: func() int { return len(w.releases) },
		Tried:    func(i int, good bool, why string) { w.tried = append(w.tried, good) },
		Found:    func(i int) error { w.base = w.releases[i]; return nil },
		In: func(i int) (int, bool) {
			p := w.given
			if i >= 0 {
				p = w.releases[i]
			}
			return p - w.base - 1, p > w.base
		},
	}
	return opt
}

// TestTheWalkBackFindsAnOlderGoodRelease: a culprit below the good
// endpoint given makes the endpoints measure alike; the walk leaves the
// two releases above the culprit after a few boots each, takes the first
// below it as the good endpoint, and the search of the range from it
// names the culprit. Stopped by the lab at any boot of the walk and
// resumed from what was recorded, the run boots the same kernels.
func TestTheWalkBackFindsAnOlderGoodRelease(t *testing.T) {
	newLab := func(failAt int) (*lineLab, *walkLine) {
		w := &walkLine{n: 400, given: 300, base: 300, releases: []int{260, 220, 150, 100}}
		return &lineLab{n: 400, culprit: 180, good: math.Log(7000), bad: math.Log(15000), seed: 4, failAt: failAt, walk: w}, w
	}
	l, w := newLab(-1)
	res, err := Run(context.Background(), l, w.options(l, nil))
	if err != nil {
		t.Fatal(err)
	}
	if res.End.Kind != culprit.Found || w.base != 150 || res.End.Commit != 180-150-1 {
		t.Fatalf("%+v from %d: want commit 180 (index %d of the range from release 150) found", res.End, w.base, 180-150-1)
	}
	if len(w.tried) != 3 || w.tried[0] || w.tried[1] || !w.tried[2] {
		t.Fatalf("releases tried %v: want 260 and 220 left, 150 good", w.tried)
	}
	walk, first, last := 0, -1, 0
	for i, k := range l.booted {
		if k.Why == WalkingBack {
			walk++
			last = i
			if first < 0 {
				first = i
			}
		}
	}
	if walk > 14 {
		t.Errorf("the walk took %d boots of 3 releases: want at most 14", walk)
	}
	t.Logf("walk: %d boots; the whole run %d", walk, len(l.booted))
	for _, stop := range []int{first, first + 2, last, last + 1} {
		fl, fw := newLab(stop)
		if _, err := Run(context.Background(), fl, fw.options(fl, nil)); !errors.Is(err, errLabDown) {
			t.Fatalf("stopped at boot %d: %v, want the lab's error", stop, err)
		}
		al, aw := newLab(-1)
		aw.base = fw.base // the range as the run's log keeps it
		al.booted = append(al.booted, fl.booted...)
		res2, err := Run(context.Background(), al, aw.options(al, fl.records))
		sameRun(t, stop, res, res2, err, l.booted, al.booted)
	}
}

// TestAWalkThatFindsNoGoodReleaseIsNotReproduced: every release bad, the
// walk tries each (a few boots of each) and the run ends not
// reproduced, with no search.
func TestAWalkThatFindsNoGoodReleaseIsNotReproduced(t *testing.T) {
	w := &walkLine{n: 400, given: 300, base: 300, releases: []int{260, 220}}
	l := &lineLab{n: 400, culprit: 50, good: math.Log(7000), bad: math.Log(15000), seed: 6, failAt: -1, walk: w}
	res, err := Run(context.Background(), l, w.options(l, nil))
	if err != nil {
		t.Fatal(err)
	}
	if res.Search != nil || res.NotReproduced == "" || len(w.tried) != 2 || w.tried[0] || w.tried[1] {
		t.Fatalf("%+v, tried %v: want not reproduced after both releases", res, w.tried)
	}
	walk := 0
	for _, k := range l.booted {
		if k.Why == WalkingBack {
			walk++
		}
	}
	if walk < 2*culprit.MinCalibrationBoots || walk > 8 {
		t.Errorf("the walk took %d boots of 2 bad releases: want 6 to 8", walk)
	}
}

// TestAPoolWalksBackOnEveryMachine: three machines at their own levels
// walk back together, each booting the release judged; the search from
// the release found names the culprit.
func TestAPoolWalksBackOnEveryMachine(t *testing.T) {
	w := &walkLine{n: 400, given: 300, base: 300, releases: []int{260, 220, 150, 100}}
	l := &lineLab{n: 400, culprit: 180, good: math.Log(7000), bad: math.Log(15000), seed: 4, failAt: -1, walk: w}
	p := newLinePool(l, 1, 1.4, 0.95)
	res, err := RunPool(context.Background(), p, w.options(l, nil))
	if err != nil {
		t.Fatal(err)
	}
	if res.End.Kind != culprit.Found || w.base != 150 || res.End.Commit != 180-150-1 {
		t.Fatalf("%+v from %d: want commit 180 found from release 150", res.End, w.base)
	}
	for i, ks := range p.on {
		walk := 0
		for _, k := range ks {
			if k.Why == WalkingBack {
				walk++
			}
		}
		if walk == 0 {
			t.Errorf("machine %d booted no release: %v", i, ks)
		}
	}
}
