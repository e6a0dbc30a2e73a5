package lab

import "kbisect/verdict"

// Search is the walk back from a good endpoint that measured bad, to an
// older release that measures good (run's posterior search walks it; a
// state directory of the older rule search holds one too): what was
// tried, what it cost, and the range the search goes on with.
type Search struct {
	// Given is the good endpoint the user gave, which measured bad; From
	// the release the walk started below.
	Given string `json:"given"`
	From  string `json:"from"`
	Tried []Try  `json:"tried"`
	// Kernels is how many kernels the walk measured (or tried to build).
	Kernels int `json:"kernels"`
	// Found is the release that measured good, "" when none did; Good its
	// commit. Bad is the oldest revision measured bad on the way down:
	// the bisection's new bad end (the first bad commit is below it).
	Found string `json:"found,omitempty"`
	Good  string `json:"good,omitempty"`
	Bad   string `json:"bad"`
	// Reason says how the walk ended.
	Reason string `json:"reason"`
}

// Try is one release of the walk.
type Try struct {
	Tag     string          `json:"tag"`
	Commit  string          `json:"commit"`
	Verdict verdict.Verdict `json:"verdict"`
	Reason  string          `json:"reason"`
	// Median of the samples, in the metric's unit (none when not
	// measured).
	Median  float64 `json:"median,omitempty"`
	Kind    string  `json:"kind,omitempty"`
	Seconds float64 `json:"seconds"`
}
