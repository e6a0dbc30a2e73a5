//go:build race

package main

import "testing"

// longUnderRace skips a long end-to-end run of one machine under the race
// detector: the runs of several machines race the same code, and the
// package's race run must stay well inside CI's limit (it took 2,352 s of
// 2,400 with them).
func longUnderRace(t *testing.T) {
	t.Helper()
	t.Skip("a long run on one machine: under the race detector, the runs of several machines race the same code")
}
