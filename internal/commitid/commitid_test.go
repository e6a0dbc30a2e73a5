package commitid

import "testing"

func TestShortKeepsTwelveHexDigits(t *testing.T) {
	for in, want := range map[string]string{
		"":              "",
		"abc":           "abc",
		"0123456789ab":  "0123456789ab",
		"0123456789abc": "0123456789ab",
		"89b1a4ba67bd7a1a5d1ee9f30e7d49a35c2bde59": "89b1a4ba67bd",
	} {
		if got := Short(in); got != want {
			t.Errorf("Short(%q) = %q, want %q", in, got, want)
		}
	}
}
