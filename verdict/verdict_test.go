package verdict

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]Verdict{"good": Good, "old": Good, "bad": Bad, "new": Bad, "skip": Skip} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "unsure", "drift", "Good", " good"} {
		if got, err := Parse(in); err == nil || got != "" {
			t.Errorf("Parse(%q) = %q, %v; want an error", in, got, err)
		}
	}
	if _, err := Parse("maybe"); err == nil || err.Error() != `unknown verdict "maybe" (want good, bad or skip)` {
		t.Errorf("Parse(maybe): %v", err)
	}
}

func TestValid(t *testing.T) {
	for v, want := range map[Verdict]bool{Good: true, Bad: true, Skip: true, Unsure: false, Drift: false, "": false, "old": false} {
		if v.Valid() != want {
			t.Errorf("%q.Valid() = %v", v, !want)
		}
	}
}
