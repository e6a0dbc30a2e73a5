//go:build !race

package main

import "testing"

// longUnderRace skips a long end-to-end run of one machine under the race
// detector (race_on_test.go); here it runs.
func longUnderRace(*testing.T) {}
