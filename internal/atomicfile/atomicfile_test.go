package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFileReplacesAndLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, data := range []string{"old\n", "new\n"} {
		if err := WriteFile(path, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "new\n" {
		t.Errorf("read %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %d files, want 1", len(entries))
	}
}

func TestJSONRoundTripsAndReadErrorsSayWhy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "deep", "state.json")
	var v struct{ A int }
	if err := ReadJSON(path, &v); !os.IsNotExist(err) {
		t.Fatalf("a missing file: %v, want not exist", err)
	}
	if err := WriteJSON(path, map[string]int{"A": 7}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "{\n  \"A\": 7\n}\n" {
		t.Errorf("wrote %q", b)
	}
	if err := ReadJSON(path, &v); err != nil || v.A != 7 {
		t.Errorf("read %+v, %v", v, err)
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ReadJSON(path, &v); err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("a torn file: %v, want an error naming it", err)
	}
}
