package lab

import "kbisect/noise"

// Confirmation is what an older kbisect's rule search (verdict.search:
// rule) kept in confirmation.json, which its state directories still
// report: the first bad commit measured again as kbisect ab measures,
// against its parent, and the bad endpoint against itself with the
// culprit reverted, each pair in alternating rounds on fresh boots.
type Confirmation struct {
	// Culprit and Parent gather the rounds of the first comparison:
	// every sample of each kernel.
	Culprit *Evidence `json:"culprit"`
	Parent  *Evidence `json:"parent"`
	// Comparison is of the culprit (B) against its parent (A).
	Comparison noise.Comparison `json:"comparison"`
	// WithParent is that comparison in full; Reverted is the bad
	// endpoint (A) against itself with the culprit reverted (B), nil
	// when the revert could not be made (Flags say why).
	WithParent *ABResult `json:"with_parent"`
	Reverted   *ABResult `json:"reverted,omitempty"`
	// Confirmed says the culprit is significantly worse than its parent,
	// measured bad while the parent measured good, and (when the revert
	// was made) the bad endpoint is significantly better without it.
	Confirmed bool `json:"confirmed"`
	// Flags are what a reader must know: the culprit does not change the
	// binary, is a merge, did not measure as before, or does not revert.
	Flags []string `json:"flags,omitempty"`
}
