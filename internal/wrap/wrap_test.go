package wrap

import (
	"strings"
	"testing"
)

func TestLinesKeepsToTheWidthAndEveryWord(t *testing.T) {
	s := "B is 4,300× noisier than A on all 32 CPUs (noise per period: 51,786 µs against 12 µs), p = 0.012"
	got := Lines(s, 40, "  ", "    ")
	for _, l := range strings.Split(got, "\n") {
		if len([]rune(l)) > 40 {
			t.Errorf("line of %d: %q", len([]rune(l)), l)
		}
	}
	if strings.Join(strings.Fields(got), " ") != s || !strings.HasPrefix(got, "  B is") || !strings.Contains(got, "\n    ") {
		t.Errorf("folded:\n%s", got)
	}
	if got := Lines("a-very-long-word-that-cannot-fold short", 10, "", ""); got != "a-very-long-word-that-cannot-fold\nshort" {
		t.Errorf("long word: %q", got)
	}
}
