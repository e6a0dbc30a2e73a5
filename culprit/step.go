package culprit

// StepKind says what the search wants next, or how it ended.
type StepKind uint8

// The kinds of step.
const (
	_ StepKind = iota
	// Measure asks for one boot of Step.Commit (of the bad endpoint with
	// it reverted when Reverted; of the good endpoint when Commit is
	// GoodEndpoint), sampled while More says so.
	Measure
	// Found: Step.Commit is the first bad commit, at Step.Probability,
	// confirmed by fresh boots.
	Found
	// Inconclusive: the budget ran out, or what is left cannot be told
	// apart (skipped commits), or the model did not hold; Step.Candidates
	// lead.
	Inconclusive
	// NotReproduced: the range most likely holds no bad commit.
	NotReproduced
)

// GoodEndpoint is the Commit of a step or observation of the good
// endpoint: the search boots it now and then to follow the machine's
// drift, and before it names a culprit.
const GoodEndpoint = goodEndpoint

// Step is the search's answer to "what next?".
type Step struct {
	Kind        StepKind
	Commit      int
	Reverted    bool
	Confirming  bool
	Probability float64
	Candidates  []Candidate
	Reason      string
	// Later are, with Found, the later steps the search saw on its way
	// (candidates it converged on first, whose parents measured worse
	// than the good endpoint): Commit is the first step.
	Later []int
}

// Observation is one boot the search took in: replayed in order, the
// observations rebuild the same posterior.
type Observation struct {
	// Commit is the commit booted: an index of the range, or
	// GoodEndpoint.
	Commit   int  `json:"commit"`
	Reverted bool `json:"reverted,omitempty"`
	Skipped  bool `json:"skipped,omitempty"`
	// Endpoint marks a calibration boot of an endpoint (ObserveAt):
	// evidence, but not a boot of the search's budget.
	Endpoint bool `json:"endpoint,omitempty"`
	// Confirming marks a boot of the leading candidate's confirmation:
	// a replay learns from it when the confirmation began.
	Confirming bool      `json:"confirming,omitempty"`
	Samples    []float64 `json:"samples,omitempty"`
	// Evidence is what the boot said when it came, "like bad" over
	// "like good" in log, under the model's best guesses then.
	Evidence float64 `json:"evidence"`
}
