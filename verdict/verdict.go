// Package verdict owns the one verdict type of kbisect: what a test, a
// rule, a bisection, a night and the history say of one kernel. It
// imports no kbisect package, so every package may use it.
package verdict

import "fmt"

// Verdict is the answer for one commit or kernel. Its values are the
// words kbisect writes in its files (the session log, the evidence, the
// history), so a Verdict is stored as it is. The zero value "" is no
// verdict: it is not Valid, so a tester that forgets to set one cannot
// pass for good.
type Verdict string

// The verdicts.
const (
	// Good, Bad and Skip are a bisection's verdicts, with git's names.
	Good Verdict = "good"
	Bad  Verdict = "bad"
	Skip Verdict = "skip"
	// Unsure is a rule's answer when it is not yet sure; a bisection
	// records it as Skip.
	Unsure Verdict = "unsure"
	// Drift is the nightly's: the baseline itself measured bad.
	Drift Verdict = "drift"
)

// Valid reports whether v is one of a bisection's verdicts: good, bad or
// skip.
func (v Verdict) Valid() bool {
	return v == Good || v == Bad || v == Skip
}

// Parse accepts good, bad and skip, and git's alternative terms old and
// new.
func Parse(s string) (Verdict, error) {
	switch s {
	case "good", "old":
		return Good, nil
	case "bad", "new":
		return Bad, nil
	case "skip":
		return Skip, nil
	}
	return "", fmt.Errorf("unknown verdict %q (want good, bad or skip)", s)
}
