package report

import "kbisect/lab"

// ABResultJSON is kbisect ab --json.
type ABResultJSON struct {
	Result   string     `json:"result"` // different, no-difference, aborted
	A        ABSideJSON `json:"a"`
	B        ABSideJSON `json:"b"`
	Rounds   int        `json:"rounds"`
	Samples  int        `json:"samples"`
	Measured int        `json:"rounds_measured"` // rounds of both sides measured so far
	Command  string     `json:"command,omitempty"`
	Report   any        `json:"report,omitempty"`
	StateDir string     `json:"state_dir,omitempty"`
	Error    string     `json:"error,omitempty"`
}

type ABSideJSON struct {
	Commit string `json:"commit"`
	Label  string `json:"label"`
}

// ABResultJSONOf is the answer's frame for a plan: the kernels, the
// rounds and where the state is.
func ABResultJSONOf(plan lab.ABPlan, state string) ABResultJSON {
	return ABResultJSON{A: ABSideJSON{plan.A, plan.ALabel}, B: ABSideJSON{plan.B, plan.BLabel},
		Rounds: plan.Rounds, Samples: plan.Samples, StateDir: state, Command: plan.Command}
}

// ABVerdict is the comparison's result word: different or no-difference.
func ABVerdict(res *lab.ABResult) string {
	if res.Report != nil && res.Report.Comparison.Significant() {
		return "different"
	}
	return "no-difference"
}
