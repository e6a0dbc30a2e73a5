package run

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kbisect/bisect"
	"kbisect/internal/simlab"
	"kbisect/internal/simnoise"
	"kbisect/lab"
	"kbisect/progress"
)

// A search boot on a machine whose endpoints lie far apart starts with
// one sample when the job leaves verdict.samples.min to kbisect, and
// takes the job's minimum when it names one; calibration's boots take 5
// either way (the real pipeline, journal and state: the simulated lab).
func TestASearchBootTakesOneSampleWhereOneIsDecisive(t *testing.T) {
	if err := simlab.Requirements(); err != nil {
		t.Skip(err)
	}
	model, err := simnoise.Parse("spread=0.2")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, samples string
		least         int
	}{
		{"left to kbisect", "samples: {max: 5}", 1},
		{"named by the job", "samples: {min: 3, max: 5}", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			// The seed report's levels, 3 µs against a storm.
			l, err := simlab.New(dir, simlab.Options{Seed: 3, Commits: 60, Noise: model, Duration: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if err := posteriorJob(l.JobFile); err != nil {
				t.Fatal(err)
			}
			job, err := os.ReadFile(l.JobFile)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(job), "samples: {min: 3, max: 5}") {
				t.Fatal("the lab's job file names no samples: {min: 3, max: 5} to replace")
			}
			text := strings.Replace(string(job), "samples: {min: 3, max: 5}", c.samples, 1)
			if err := os.WriteFile(l.JobFile, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			state := filepath.Join(dir, "state")
			var msgs strings.Builder
			res, err := Job(context.Background(), JobOptions{Range: Range{Goods: []string{l.Tree.Good}, Bad: l.Tree.Bad},
				Jobs: []string{l.JobFile}, State: state, Messages: &msgs, Progress: progress.NewLines(&msgs)})
			if err != nil {
				t.Fatal(err)
			}
			defer res.Close()
			if res.Kind != bisect.Found || res.JSON.FirstBad != l.Tree.Expected.FirstBad {
				t.Fatalf("%s %s, want %s found", res.Kind, res.JSON.FirstBad, l.Tree.Expected.FirstBad)
			}
			j, err := lab.OpenSearchJournal(state)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			per := map[string][]int{}
			for _, r := range j.Records() {
				if len(r.Values) > 0 {
					per[r.Kind] = append(per[r.Kind], len(r.Values))
				}
			}
			for _, kind := range []string{lab.SearchGood, lab.SearchBad} {
				for _, n := range per[kind] {
					if n != 5 {
						t.Errorf("a calibration boot (%s) took %d samples, want 5: %v", kind, n, per[kind])
					}
				}
			}
			boots := per[lab.SearchBoot]
			if len(boots) < 4 {
				t.Fatalf("%d search boots: %v", len(boots), boots)
			}
			ones := 0
			for _, n := range boots {
				if n < c.least || n > 5 {
					t.Errorf("a search boot took %d samples, want %d to 5: %v", n, c.least, boots)
				}
				if n == 1 {
					ones++
				}
			}
			if c.least == 1 && ones < len(boots)/2 {
				t.Errorf("%d of %d search boots took one sample (%v): one is decisive here", ones, len(boots), boots)
			}
			if said := strings.Contains(msgs.String(), "one sample is decisive here"); said != (c.least == 1) {
				t.Errorf("the run said it starts boots with one sample: %v, want %v:\n%s", said, c.least == 1, msgs.String())
			}
			t.Logf("samples of the search's boots: %v", boots)
		})
	}
}
