package run

import (
	"testing"

	"kbisect/culprit"
	"kbisect/lab"
)

// The planner weighs what this lab measured: builds by the builds that
// ran (a cached one says nothing), boots by each boot's time less its
// build and samples, and the job's guesses where nothing was measured.
func TestMeasuredCostsComeFromTheJournal(t *testing.T) {
	guess := culprit.Costs{Build: 600, Boot: 90, Sample: 15}
	if got := measuredCosts(nil, guess); got != guess {
		t.Fatalf("no boots yet: %+v, want the guess %+v", got, guess)
	}
	records := []lab.SearchRecord{
		{Kind: lab.SearchBad, Values: []float64{1, 2, 3, 4, 5}, Seconds: 1011, BuildSeconds: 900}, // 1011-900-75 = 36
		{Kind: lab.SearchGood, Values: []float64{1, 2, 3, 4, 5}, Seconds: 118, BuildSeconds: 0},   // 43
		{Kind: lab.SearchBoot, Values: []float64{1, 2, 3}, Seconds: 545, BuildSeconds: 480},       // 20
		{Kind: lab.SearchSkip, Seconds: 700, BuildSeconds: 0},                                     // no boot
		{Kind: lab.SearchBoot, Values: []float64{1, 2, 3}, Seconds: 5000, BuildSeconds: 0},        // a slow boot: 4955
	}
	got := measuredCosts(records, guess)
	want := culprit.Costs{Build: 690, Boot: 39.5, Sample: 15} // medians of 900, 480 and of 36, 43, 20, 4955
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
