package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestDemoNoiseSettingsThatCannotBeAreUsageErrors: a bad --noise stops
// the demo before it makes a lab, naming the flag and the setting.
func TestDemoNoiseSettingsThatCannotBeAreUsageErrors(t *testing.T) {
	for in, want := range map[string]string{
		"bogus=1":       `demo --noise bogus=1: "bogus": no such setting; the settings are spread, boot-spread, bad-boots, stray-boots, spikes and flips`,
		"spread":        `demo --noise spread: "spread": write setting=value, as in spread=0.2`,
		"bad-boots=60%": "demo --noise bad-boots=60%: bad-boots 0.6 is not between 0 and 0.5",
	} {
		code, stdout, stderr := runCLI(t, context.Background(), "demo", "--dir", t.TempDir(), "--noise", in)
		if code != exitUsage || !strings.Contains(stderr, want) || stdout != "" || strings.Contains(stderr, "SIMULATED lab") {
			t.Errorf("--noise %s: exit %d, stdout %q, stderr %q; want exit %d and %q", in, code, stdout, stderr, exitUsage, want)
		}
	}
	code, stdout, _ := runCLI(t, context.Background(), "demo", "--noise", "bogus=1", "--json")
	var out struct{ Result, Error string }
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitUsage || out.Result != "aborted" || !strings.Contains(out.Error, "demo --noise bogus=1") {
		t.Errorf("--json: exit %d, %v, %q", code, err, stdout)
	}
}

// TestDemoWithMildNoiseFindsThePlantedRegression: with a spread within
// each boot of 10 % the demo still finds the planted commit, and says
// which noise its lab had.
func TestDemoWithMildNoiseFindsThePlantedRegression(t *testing.T) {
	code, stdout, stderr := runCLI(t, context.Background(), "demo", "--commits", "120", "--dir", t.TempDir(), "--noise", "spread=0.1")
	if code != exitOK || !strings.Contains(stdout, " is the first bad commit\n") ||
		!strings.Contains(stderr, "  noise:   as real machines have it, spread=0.1,boot-spread=0,") ||
		!strings.Contains(stderr, "kbisect demo: found the planted regression ") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
