package report

import "testing"

// A reason reads in JSON as it does in text: "P(bad) >0.9999", not
// "\u003e0.9999", and the JSON is indented as the docs show it.
func TestMarshalJSONKeepsComparisonsReadable(t *testing.T) {
	b, err := MarshalJSON(map[string]any{"reason": "P(bad) >0.9999 & <1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"reason\": \"P(bad) >0.9999 & <1\"\n}"; string(b) != want {
		t.Fatalf("got %q, want %q", b, want)
	}
}
