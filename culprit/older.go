package culprit

import "fmt"

// Older is what the boots of an older release tell on the walk back
// from a good endpoint that measured as bad as the bad one.
type Older int

// What an older release's boots tell.
const (
	// OlderMore: boot it again.
	OlderMore Older = iota
	// OlderGood: it measures apart from the bad endpoint, as calibration
	// would have it of a good endpoint: the search can start from it.
	OlderGood
	// OlderAlike: it measures like the bad endpoint, or too near it to
	// start a search from: walk on to the next older one.
	OlderAlike
)

// JudgeOlder judges an older release's boots against the bad endpoint's
// calibration boots. A release is good only as calibration would take a
// good endpoint (Calibrate, with its boots as the good side): a wrong
// good would search a range without the culprit. Walking on past a good
// release costs only the bits of a longer range (its boots stay evidence
// of the search), so a release is left after MinCalibrationBoots boots
// unless they lean to it being below the bad endpoint (the chance that
// the bad endpoint is worse, Reproduced, at even odds or more); one that
// leans is booted until Calibrate says. why says which, in a line.
func JudgeOlder(release, bad [][]float64, least int) (o Older, m Model, why string) {
	m, more, err := Calibrate(release, bad, least, FitOptions{})
	n := len(release)
	switch {
	case !more && err == nil:
		return OlderGood, m, fmt.Sprintf("apart from the bad endpoint after %d boots, as calibration takes a good endpoint", n)
	case !more:
		return OlderAlike, m, fmt.Sprintf("after %d boots: %v", n, err)
	case n < MinCalibrationBoots:
		return OlderMore, m, ""
	}
	f, err := Fit(release, bad, FitOptions{})
	if err == nil {
		err = f.Validate()
	}
	if err != nil {
		return OlderAlike, m, fmt.Sprintf("like the bad endpoint after %d boots: %v", n, err)
	}
	if p := Reproduced(release, bad, f); p < reproducedAt {
		return OlderAlike, m, fmt.Sprintf("like the bad endpoint after %d boots: the bad endpoint is worse with a chance of only %.2f", n, p)
	}
	return OlderMore, m, ""
}
