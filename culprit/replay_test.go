package culprit

import (
	"encoding/json"
	"math"
	"testing"
)

// sameStep fails unless two searches would do the same next.
func sameStep(t *testing.T, at int, want, got Step) {
	t.Helper()
	if want.Kind != got.Kind || want.Commit != got.Commit || want.Reverted != got.Reverted ||
		want.Confirming != got.Confirming || math.Abs(want.Probability-got.Probability) > 1e-12 {
		t.Fatalf("after %d observations the search says %+v, its replay %+v", at, want, got)
	}
}

func TestReplayRebuildsTheSearch(t *testing.T) {
	for _, c := range []struct {
		name    string
		parents [][]int
		culprit int
		skip    []int
		wrong   bool
	}{
		{"chain", nil, 9, nil, false},
		{"merge range with a skip", mergeRange, 4, []int{5}, false},
		{"merge range, contradicted", mergeRange, 7, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Chain(16)
			if c.parents != nil {
				d = mustDAG(t, c.parents)
			}
			l := newLab(t, 3, d, c.culprit)
			for _, x := range c.skip {
				l.unbuildable[x] = true
			}
			if c.wrong {
				contradicted(l, c.culprit)
			}
			opt := Options{Revert: true, MaxBoots: 60}
			s := l.calibrated(opt)
			for step := 0; ; step++ {
				replay, err := New(d, l.model, opt)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range s.Log() {
					replay.Replay(o)
				}
				want, _ := s.Probabilities()
				got, _ := replay.Probabilities()
				for i := range want {
					if math.Abs(want[i]-got[i]) > 1e-12 {
						t.Fatalf("after %d observations commit %d is at %g, in the replay %g", len(s.Log()), i, want[i], got[i])
					}
				}
				next := s.Next()
				sameStep(t, len(s.Log()), next, replay.Next())
				if next.Kind != Measure {
					assertReplayFromJSON(t, d, s, l.model, opt, next)
					break
				}
				l.measure(s, next)
			}
		})
	}
}

// assertReplayFromJSON replays the log as a run that stopped stores it.
func assertReplayFromJSON(t *testing.T, d *DAG, s *Search, m Model, opt Options, want Step) {
	t.Helper()
	data, err := json.Marshal(s.Log())
	if err != nil {
		t.Fatal(err)
	}
	var log []Observation
	if err := json.Unmarshal(data, &log); err != nil {
		t.Fatal(err)
	}
	replay, err := New(d, m, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range log {
		replay.Replay(o)
	}
	sameStep(t, len(log), want, replay.Next())
	if replay.Boots() != s.Boots() {
		t.Fatalf("the replay took in %d boots, the search %d", replay.Boots(), s.Boots())
	}
}
