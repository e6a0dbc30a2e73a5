package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/internal/atomicfile"
	"kbisect/verdict"
)

// TestRetrySkipsSetsAsideSkipsAndDropsThemFromTheJournal: the skipped
// commits' evidence is kept aside and the search journal replays without
// their skips; boots and measured commits stay.
func TestRetrySkipsSetsAsideSkipsAndDropsThemFromTheJournal(t *testing.T) {
	dir := t.TempDir()
	skipped, measured, journaled := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40)
	for c, v := range map[string]verdict.Verdict{skipped: verdict.Skip, measured: verdict.Good} {
		ev := &Evidence{Commit: c, Verdict: v, Failure: &Failure{Class: FailBoot}}
		if err := atomicfile.WriteJSON(filepath.Join(dir, "commits", c+".json"), ev); err != nil {
			t.Fatal(err)
		}
	}
	j, err := OpenSearchJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []SearchRecord{{Kind: SearchBoot, Commit: measured, Values: []float64{1}}, {Kind: SearchSkip, Commit: journaled, Reason: "does not build"}} {
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	commits, err := RetrySkips(dir)
	if err != nil || strings.Join(commits, " ") != skipped+" "+journaled {
		t.Fatalf("retried %v, %v", commits, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "commits", skipped+".skipped-1.json")); err != nil {
		t.Error(err)
	}
	if ev, err := ReadEvidence(dir, measured); err != nil || ev.Verdict != verdict.Good {
		t.Errorf("a measured commit's evidence: %+v %v", ev, err)
	}
	if _, err := ReadEvidence(dir, skipped); !os.IsNotExist(err) {
		t.Errorf("the skipped commit's evidence is still read: %v", err)
	}
	j, err = OpenSearchJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if rs := j.Records(); len(rs) != 1 || rs[0].Kind != SearchBoot {
		t.Errorf("the journal holds %+v", rs)
	}
}
