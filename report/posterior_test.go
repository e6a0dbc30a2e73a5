package report

import (
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/lab"
)

// The answer's text says where the regression is not the plain case, as
// the search saw it, after the answer: found or not.
func TestThePosteriorTextSaysTheRegressionsShape(t *testing.T) {
	shape := []string{"the regression shows on about half of a bad kernel's boots (the others measure as a good kernel's): a boot that measures good says little"}
	want := " The regression shows on about half of a bad kernel's boots (the others measure as a good kernel's): a boot that measures good says little."
	for _, c := range []struct {
		kind  bisect.ResultKind
		shape []string
		want  string
	}{
		{bisect.Found, shape, want},
		{bisect.Inconclusive, shape, want},
		{bisect.Found, nil, "without it."},
	} {
		r := &Run{Result: bisect.Result{Kind: c.kind, FirstBad: plumbing.NewHash("3636d8bef91a0000000000000000000000000000")},
			Search: &lab.SearchSummary{Boots: 69, CalibrationBoots: 36, Probability: 0.999, Confidence: 0.99, Reason: "the budget ran out", Shape: c.shape,
				Candidates: []lab.SearchCandidate{{Commit: "3636d8bef91a0000000000000000000000000000", Probability: 0.9}}}}
		if got := r.posteriorText(); !strings.HasSuffix(got, c.want) {
			t.Errorf("%s: %q, want it to end %q", c.kind, got, c.want)
		}
	}
}
