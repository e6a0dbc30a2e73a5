package noise

import (
	"regexp"
	"testing"
)

// FuzzParseCommand feeds arbitrary command output to both ways of taking
// a number from it: never a panic, and numbers only when it said so.
func FuzzParseCommand(f *testing.F) {
	f.Add([]byte("      8        8581ms        8602ms\n     16       13800ms       13715ms\n"))
	f.Add([]byte(`{"results": [{"ops_per_sec": 1234.5}, {"ops_per_sec": "99"}], "lat": [1, 2, 3]}`))
	re := regexp.MustCompile(`(\d+(?:\.\d+)?)ms`)
	f.Fuzz(func(t *testing.T, out []byte) {
		if m, err := ParseCommand(out, CommandMetric{Pattern: re}); err == nil && len(m.Numbers) == 0 {
			t.Fatal("no error and no number")
		}
		if m, err := ParseCommand(out, CommandMetric{JSONPath: "results[0].ops_per_sec"}); err == nil && len(m.Numbers) != 1 {
			t.Fatalf("%d numbers from one path", len(m.Numbers))
		}
	})
}
