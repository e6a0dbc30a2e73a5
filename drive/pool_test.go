package drive

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"kbisect/culprit"
)

// linePool is machines over one line of commits (lineLab's truth and
// noise), each at its own level (a factor on every sample) and clock: a
// boot takes 5 units and one a sample, and Wait hands the boots back in
// the order they end. Machine loseAt[i] > 0 is lost at its boot of that
// number (1 the first): the boot ends in ErrMachineLost.
type linePool struct {
	lab    *lineLab
	factor []float64
	clock  []float64
	busy   []bool
	boots  []Boot
	count  []int
	loseAt map[int]int
	// on lists, per machine, the kernels it booted and took in; ended
	// the boots handed back, in order, as a run journals them.
	on    [][]Kernel
	ended []Record
	// stopAt > 0 fails the lab (an error that is not a lost machine's)
	// when that many boots have ended.
	stopAt int
}

func newLinePool(lab *lineLab, factors ...float64) *linePool {
	k := len(factors)
	return &linePool{lab: lab, factor: factors, clock: make([]float64, k), busy: make([]bool, k), boots: make([]Boot, k),
		count: make([]int, k), loseAt: map[int]int{}, on: make([][]Kernel, k)}
}

func (p *linePool) Machines() int { return len(p.factor) }

func (p *linePool) Start(i int, k Kernel, more func([]float64) bool) {
	if p.busy[i] {
		panic(fmt.Sprintf("machine %d started while busy", i))
	}
	p.count[i]++
	b, _ := p.lab.Boot(context.Background(), k, func(xs []float64) bool {
		scaled := make([]float64, len(xs))
		for j, x := range xs {
			scaled[j] = x * p.factor[i]
		}
		return more(scaled)
	})
	for j := range b.Samples {
		b.Samples[j] *= p.factor[i]
	}
	p.clock[i] += 5 + float64(len(b.Samples))
	p.busy[i], p.boots[i] = true, b
	p.on[i] = append(p.on[i], k)
}

func (p *linePool) Wait(context.Context) (int, Boot, error) {
	first := -1
	for i, b := range p.busy {
		if b && (first < 0 || p.clock[i] < p.clock[first]) {
			first = i
		}
	}
	if first < 0 {
		panic("Wait with no boot under way")
	}
	p.busy[first] = false
	for i, b := range p.busy {
		if !b {
			p.clock[i] = math.Max(p.clock[i], p.clock[first])
		}
	}
	if p.count[first] == p.loseAt[first] {
		p.on[first] = p.on[first][:len(p.on[first])-1]
		return first, Boot{}, fmt.Errorf("machine %d: ssh: connect: no route to host: %w", first, ErrMachineLost)
	}
	if p.stopAt > 0 && len(p.ended) == p.stopAt {
		return first, Boot{}, errLabDown
	}
	p.ended = append(p.ended, Record{Kernel: p.on[first][len(p.on[first])-1], Boot: p.boots[first], Machine: first})
	return first, p.boots[first], nil
}

// TestAPoolFindsTheCulpritWithMachinesAtTheirOwnLevels: three machines,
// one 40 % above the others, name the planted commit of 300, each having
// booted both endpoints and searched; a machine lost mid-run (its fifth
// boot never ends) leaves the others to finish, and the result says so;
// with every machine lost the run ends with the last one's error.
func TestAPoolFindsTheCulpritWithMachinesAtTheirOwnLevels(t *testing.T) {
	for _, lose := range []int{0, 5} {
		lab := &lineLab{n: 300, culprit: 171, good: math.Log(7000), bad: math.Log(15000), seed: 9, failAt: -1}
		p := newLinePool(lab, 1, 1.4, 0.95)
		if lose > 0 {
			p.loseAt[1] = lose
		}
		res, err := RunPool(context.Background(), p, options(lab, nil))
		if err != nil {
			t.Fatal(err)
		}
		if res.End.Kind != culprit.Found || res.End.Commit != lab.culprit {
			t.Fatalf("lose at %d: %+v, want %d found", lose, res.End, lab.culprit)
		}
		for i, ks := range p.on {
			ends, search := map[int]bool{}, 0
			for _, k := range ks {
				if k.Why == Calibrating {
					ends[k.Commit] = true
				} else {
					search++
				}
			}
			if i == 1 && lose > 0 {
				if len(ks) != lose-1 || len(res.Lost) != 1 || res.Lost[0].Machine != 1 || !errors.Is(res.Lost[0].Err, ErrMachineLost) {
					t.Errorf("machine 1 lost at its boot %d: it took in %d boots, the result lists %+v", lose, len(ks), res.Lost)
				}
				continue
			}
			if !ends[culprit.GoodEndpoint] || !ends[lab.n-1] || search == 0 {
				t.Errorf("lose at %d: machine %d booted %v", lose, i, ks)
			}
		}
		t.Logf("lose at %d: found in %d boots, wall %.0f units", lose, len(lab.booted), max(p.clock[0], p.clock[2]))
	}

	lab := &lineLab{n: 300, culprit: 171, good: math.Log(7000), bad: math.Log(15000), seed: 9, failAt: -1}
	p := newLinePool(lab, 1, 1)
	p.loseAt[0], p.loseAt[1] = 2, 3
	if _, err := RunPool(context.Background(), p, options(lab, nil)); !errors.Is(err, ErrMachineLost) {
		t.Fatalf("every machine lost: RunPool says %v", err)
	}
}

// TestAResumedPoolGoesOnFromItsBoots: a pool's boots, taken in again in
// the order they ended, put the search where it was: the whole run's
// boots end it at once with the same answer and no boot; stopped by the
// lab after some boots (in calibration, early in the search, midway),
// the run resumed from them on the same machines names the commit, and
// each machine keeps its level (no endpoint boot again for a machine
// that had both).
func TestAResumedPoolGoesOnFromItsBoots(t *testing.T) {
	factors := []float64{1, 1.4, 0.95}
	lab := &lineLab{n: 300, culprit: 171, good: math.Log(7000), bad: math.Log(15000), seed: 11, failAt: -1}
	whole := newLinePool(lab, factors...)
	res, err := RunPool(context.Background(), whole, options(lab, nil))
	if err != nil || res.End.Kind != culprit.Found || res.End.Commit != lab.culprit {
		t.Fatalf("the whole run: %+v, %v", res.End, err)
	}
	again := newLinePool(&lineLab{n: 300, culprit: 171, good: math.Log(7000), bad: math.Log(15000), seed: 12, failAt: -1}, factors...)
	res2, err := RunPool(context.Background(), again, options(lab, whole.ended))
	if err != nil || res2.End.Kind != res.End.Kind || res2.End.Commit != res.End.Commit {
		t.Fatalf("the whole run's %d boots again: %+v, %v; want %+v", len(whole.ended), res2.End, err, res.End)
	}
	if n := len(again.ended); n != 0 {
		t.Errorf("the whole run's boots again: %d more boots, want none: %+v", n, again.on)
	}
	if math.Abs(res2.End.Probability-res.End.Probability) > 1e-6 {
		t.Errorf("the whole run's boots again: %.9f, the run said %.9f", res2.End.Probability, res.End.Probability)
	}
	for _, cut := range []int{4, 12, len(whole.ended) / 2} {
		lab := &lineLab{n: 300, culprit: 171, good: math.Log(7000), bad: math.Log(15000), seed: 11, failAt: -1}
		first := newLinePool(lab, factors...)
		first.stopAt = cut
		if _, err := RunPool(context.Background(), first, options(lab, nil)); !errors.Is(err, errLabDown) {
			t.Fatalf("stopped after %d boots: %v", cut, err)
		}
		// Once the search has begun, a machine with both endpoints'
		// boots has its level: it boots neither again.
		ends := make([]map[int]bool, len(factors))
		for i := range ends {
			ends[i] = map[int]bool{}
		}
		searching := false
		for _, h := range first.ended {
			if h.Why == Calibrating {
				ends[h.Machine][h.Commit] = true
			} else {
				searching = true
			}
		}
		resumed := newLinePool(&lineLab{n: 300, culprit: 171, good: math.Log(7000), bad: math.Log(15000), seed: 13, failAt: -1}, factors...)
		res, err := RunPool(context.Background(), resumed, options(lab, first.ended))
		if err != nil || res.End.Kind != culprit.Found || res.End.Commit != lab.culprit {
			t.Fatalf("resumed after %d boots: %+v, %v", cut, res.End, err)
		}
		for _, h := range resumed.ended {
			if searching && h.Why == Calibrating && len(ends[h.Machine]) == 2 {
				t.Errorf("resumed after %d boots: machine %d booted an endpoint again though it had both", cut, h.Machine)
			}
		}
		t.Logf("resumed after %d boots: %d more, found at %.4f", cut, len(resumed.ended), res.End.Probability)
	}
}
