package drive

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"kbisect/culprit"
)

// lineLab is a machine over a line of n commits whose first bad one is
// culprit: a boot draws its samples around the good or the bad level
// (σ 0.2 within a boot, 0.05 from boot to boot), from one seeded stream
// per boot in order, so that a resumed run measures what the first one
// would have. It records every kernel asked for, and fails (a lab's
// error) at boot failAt.
type lineLab struct {
	n, culprit int
	good, bad  float64
	seed       uint64
	booted     []Kernel
	records    []Record // what a run journals: each boot, in order
	failAt     int
	// hidden are boots (by their index) at which a bad kernel measures
	// as a good one: an intermittent regression.
	hidden map[int]bool
	// walk, when set, places kernels on a longer line with older
	// releases (the walk back's tests).
	walk *walkLine
	// later, when set, is a second step: from culprit on a kernel
	// measures at middle, from later on at bad (the bad endpoint
	// without later at middle, without culprit at the later step's
	// effect alone).
	later  int
	middle float64
}

var errLabDown = errors.New("the lab host went away")

func (l *lineLab) Boot(_ context.Context, k Kernel, more func([]float64) bool) (Boot, error) {
	at := len(l.booted)
	if at == l.failAt {
		return Boot{}, errLabDown
	}
	l.booted = append(l.booted, k)
	bad := k.Commit == BadEndpoint || (k.Commit >= l.culprit && k.Commit != culprit.GoodEndpoint)
	if k.Reverted {
		bad = k.Commit != l.culprit
	}
	if l.walk != nil {
		bad = l.walk.bad(k, l.culprit)
	}
	level := l.good
	if bad && !l.hidden[at] {
		level = l.bad
	}
	if mid := (k.Commit < l.later && !k.Reverted) || (k.Reverted && k.Commit == l.later); l.later > 0 && bad && mid && k.Commit != BadEndpoint {
		level = l.middle
	}
	if l.later > 0 && k.Reverted && k.Commit == l.culprit {
		level = l.good + l.bad - l.middle // the later step's effect alone
	}
	rng := rand.New(rand.NewPCG(l.seed, uint64(at)))
	level += 0.05 * rng.NormFloat64()
	var xs []float64
	for len(xs) < 10 && (len(xs) == 0 || more(xs)) {
		xs = append(xs, math.Exp(level+0.2*rng.NormFloat64()))
	}
	l.records = append(l.records, Record{Kernel: k, Boot: Boot{Samples: xs}})
	return Boot{Samples: xs}, nil
}

func options(l *lineLab, hist []Record) Options {
	d := culprit.Chain(l.n)
	return Options{
		Range:  func() (*culprit.DAG, error) { return d, nil },
		Search: culprit.Options{Confidence: 0.99, MinSamples: 3, MaxSamples: 10, Revert: true, Costs: culprit.Costs{Build: 600, Boot: 120, Sample: 60}},
		Least:  3, CalibrationSamples: 5, History: hist,
	}
}

// TestARunFindsTheCulpritAndAResumedOneTakesTheSameBoots: the loop names
// the planted commit; stopped by the lab at any boot and resumed from
// what it recorded, it asks for the same kernels in the same order and
// ends the same — calibration's boots, the search's, the controls and
// the confirmation alike.
func TestARunFindsTheCulpritAndAResumedOneTakesTheSameBoots(t *testing.T) {
	whole := &lineLab{n: 300, culprit: 171, good: math.Log(7000), bad: math.Log(15000), seed: 5, failAt: -1}
	res, err := Run(context.Background(), whole, options(whole, nil))
	if err != nil {
		t.Fatal(err)
	}
	if res.End.Kind != culprit.Found || res.End.Commit != whole.culprit || res.End.Probability < 0.99 {
		t.Fatalf("%+v, want %d found", res.End, whole.culprit)
	}
	calibration, confirming := 0, 0
	for _, k := range whole.booted {
		switch k.Why {
		case Calibrating:
			calibration++
		case Confirming:
			confirming++
		}
	}
	if calibration < 2*culprit.MinCalibrationBoots || confirming == 0 {
		t.Errorf("%d calibration boots, %d confirming: want both", calibration, confirming)
	}
	for _, stop := range []int{1, calibration - 1, calibration, calibration + 5, len(whole.booted) - 2} {
		first := &lineLab{n: whole.n, culprit: whole.culprit, good: whole.good, bad: whole.bad, seed: whole.seed, failAt: stop}
		if _, err := Run(context.Background(), first, options(first, nil)); !errors.Is(err, errLabDown) {
			t.Fatalf("stopped at boot %d: %v, want the lab's error", stop, err)
		}
		again := &lineLab{n: whole.n, culprit: whole.culprit, good: whole.good, bad: whole.bad, seed: whole.seed, failAt: -1}
		again.booted = append(again.booted, first.booted...)
		res2, err := Run(context.Background(), again, options(again, first.records))
		sameRun(t, stop, res, res2, err, whole.booted, again.booted)
	}
}

// sameRun fails a run resumed after stop boots that did not end as the
// whole run did, with the same kernels booted in the same order.
func sameRun(t *testing.T, stop int, whole, resumed Result, err error, want, got []Kernel) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if resumed.End.Kind != whole.End.Kind || resumed.End.Commit != whole.End.Commit || len(got) != len(want) {
		t.Fatalf("resumed after %d boots: %+v after %d boots, want %+v after %d", stop, resumed.End, len(got), whole.End, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("resumed after %d boots: boot %d is %+v, want %+v", stop, i, got[i], want[i])
		}
	}
}

// TestAlikeEndpointsAreNotReproduced: a bad endpoint that measures as the
// good one ends calibration not reproduced, and no search is made.
func TestAlikeEndpointsAreNotReproduced(t *testing.T) {
	l := &lineLab{n: 100, culprit: 50, good: math.Log(7000), bad: math.Log(7000), seed: 9, failAt: -1}
	res, err := Run(context.Background(), l, options(l, nil))
	if err != nil {
		t.Fatal(err)
	}
	if res.NotReproduced == "" || res.Search != nil {
		t.Fatalf("%+v: want not reproduced", res)
	}
	for _, k := range l.booted {
		if k.Why != Calibrating {
			t.Fatalf("booted %+v after calibration said not reproduced", k)
		}
	}
}

// TestTheThresholdWaitsForCalibrationsBoots: an absolute threshold says
// "not reproduced" only when calibration has all its boots — a bad
// endpoint whose first three boots do not show an intermittent
// regression is booted again, and the culprit is found.
func TestTheThresholdWaitsForCalibrationsBoots(t *testing.T) {
	l := &lineLab{n: 200, culprit: 77, good: math.Log(7000), bad: math.Log(15000), seed: 3, failAt: -1,
		hidden: map[int]bool{0: true, 2: true, 4: true}}
	opt := options(l, nil)
	stops := 0
	opt.Hooks.Stop = func(goods, bads [][]float64) (string, bool) {
		stops++
		if badIsGood, goodIsBad := culprit.AgainstThreshold(goods, bads, math.Sqrt(7000*15000)); badIsGood || goodIsBad {
			return "the threshold says no regression", goodIsBad
		}
		return "", false
	}
	res, err := Run(context.Background(), l, opt)
	if err != nil {
		t.Fatal(err)
	}
	if res.NotReproduced != "" || res.End.Kind != culprit.Found || res.End.Commit != l.culprit || stops != 1 {
		t.Fatalf("not reproduced %q, end %+v, the threshold asked %d times after %d calibration boots: want %d found, the threshold asked once",
			res.NotReproduced, res.End, stops, len(res.Goods)+len(res.Bads), l.culprit)
	}
	// Three boots of each that do not show it end as the threshold says.
	l = &lineLab{n: 200, culprit: 77, good: math.Log(7000), bad: math.Log(7000), seed: 3, failAt: -1}
	opt = options(l, nil)
	opt.Hooks.Stop = func(goods, bads [][]float64) (string, bool) {
		if badIsGood, _ := culprit.AgainstThreshold(goods, bads, math.Sqrt(7000*15000)); badIsGood {
			return "the threshold says no regression", false
		}
		return "", false
	}
	if res, err := Run(context.Background(), l, opt); err != nil || res.NotReproduced != "the threshold says no regression" {
		t.Fatalf("%+v, %v: want the threshold's not reproduced", res, err)
	}
}
