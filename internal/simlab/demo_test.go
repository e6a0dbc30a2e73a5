package simlab

import (
	"strings"
	"testing"
	"time"
)

func TestJudgeCallsOnlyThePlantedRegressionRight(t *testing.T) {
	planted := strings.Repeat("ab", 20)
	tree := &Tree{Regression: planted, Expected: Expected{FirstBad: planted}}
	for _, c := range []struct {
		found, want string
		wrong       bool
	}{
		{planted, "found the planted regression abababababab in 3s (simulated lab).", false},
		{strings.Repeat("cd", 20), `WRONG: found "` + strings.Repeat("cd", 20) + `", the planted regression is abababababab (3s).`, true},
		{"", `WRONG: found "", the planted regression is abababababab (3s).`, true},
	} {
		if line, wrong := tree.Judge(c.found, 3*time.Second); line != c.want || wrong != c.wrong {
			t.Errorf("Judge(%q) = %q, %v; want %q, %v", c.found, line, wrong, c.want, c.wrong)
		}
	}
	// Among commits that do not build, no answer can name it.
	hidden := &Tree{Regression: planted, Expected: Expected{Candidates: []string{planted}}}
	if line, wrong := hidden.Judge("", time.Second); wrong || !strings.Contains(line, "inconclusive is the honest answer (1s)") {
		t.Errorf("%q, %v", line, wrong)
	}
}
