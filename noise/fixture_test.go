package noise

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture reads a file of testdata (its README says where each comes
// from).
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantParseError checks err is a *ParseError at line with msg in its text.
func wantParseError(t *testing.T, err error, line int, msg string) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v is not a *ParseError", err)
	}
	if pe.Line != line || !strings.Contains(pe.Msg, msg) {
		t.Errorf("got line %d %q, want line %d containing %q", pe.Line, pe.Msg, line, msg)
	}
}

// edit rewrites a fixture for an error case.
func edit(t *testing.T, name, old, new string) []byte {
	t.Helper()
	s := string(fixture(t, name))
	if !strings.Contains(s, old) {
		t.Fatalf("%s lacks %q", name, old)
	}
	return []byte(strings.Replace(s, old, new, 1))
}
