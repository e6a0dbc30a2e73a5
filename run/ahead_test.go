package run

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"kbisect/bisect"
	"kbisect/internal/simlab"
	"kbisect/lab"
	"kbisect/progress"
)

// TestThePosteriorSearchBuildsAhead: while a boot is measured, the
// posterior search's next kernels (if it measures good, if bad) build in
// the pipeline's slot, and the next step finds its kernel in the cache;
// the search's first commit builds while calibration is measured, and a
// revert of the bad endpoint the confirmation may ask for builds ahead
// too. The answer is --no-build-ahead's (the search may boot other
// commits: one built ahead weighs no build).
func TestThePosteriorSearchBuildsAhead(t *testing.T) {
	var boots [2][]string
	for i, noAhead := range []bool{false, true} {
		// Two labs alike: the same seed draws the same noise, boot by boot.
		l := newSimLab(t, simlab.Options{Seed: 5, Commits: 80})
		var msgs bytes.Buffer
		heard := &notes{}
		o := JobOptions{Range: Range{Goods: []string{l.Tree.Good}, Bad: l.Tree.Bad}, Jobs: []string{l.JobFile},
			State: filepath.Join(t.TempDir(), "state"), Messages: &msgs, NoBuildAhead: noAhead, Progress: heard}
		res, err := Job(context.Background(), o)
		if err != nil {
			t.Fatalf("%v\n%s", err, msgs.String())
		}
		res.Close()
		if res.Kind != bisect.Found || res.JSON.FirstBad != l.Tree.Expected.FirstBad {
			t.Fatalf("no-build-ahead %v: %s %s, want found %s", noAhead, res.Kind, res.JSON.FirstBad, l.Tree.Expected.FirstBad)
		}
		j, err := lab.OpenSearchJournal(o.State)
		if err != nil {
			t.Fatal(err)
		}
		searched := map[string]bool{}
		first, reverts := "", map[string]bool{}
		for _, rec := range j.Records() {
			boots[i] = append(boots[i], rec.Kind+" "+rec.Commit+" "+rec.Built)
			if rec.Kind == lab.SearchBoot {
				searched[rec.Commit] = true
				if first == "" {
					first = rec.Commit
				}
				if rec.Reverted {
					reverts[rec.Built] = true
				}
			}
		}
		j.Close()
		ahead := heard.commits("building ahead")
		if noAhead {
			if len(ahead) != 0 {
				t.Errorf("--no-build-ahead built ahead: %v", ahead)
			}
			continue
		}
		// The good endpoint builds while the bad one is measured, and is
		// then taken from the cache.
		good := l.Tree.GoodCommit
		built, _ := os.ReadFile(filepath.Join(o.State, "build.log"))
		if !ahead[good] || !strings.Contains(string(built), "kbisect: "+good[:12]+": the cache has this kernel") {
			t.Errorf("the good endpoint was not built ahead and used: ahead %v\n%s", ahead, built)
		}
		// The search's next kernels build while a boot is measured.
		n := 0
		for c := range ahead {
			if searched[c] {
				n++
			}
		}
		if n < 3 {
			t.Errorf("%d of the kernels the search booted were built ahead, want at least 3 (ahead: %v)", n, ahead)
		}
		if !ahead[first] {
			t.Errorf("the search's first commit %s was not built during calibration (ahead: %v)", first, ahead)
		}
		revertsAhead := 0
		for c := range reverts {
			if ahead[c] {
				revertsAhead++
			}
		}
		if len(reverts) == 0 || revertsAhead == 0 {
			t.Errorf("of the reverted kernels the confirmation booted (%v), none was built ahead (ahead: %v)", reverts, ahead)
		}
		t.Logf("%d of the %d kernels the search booted were built ahead (its first among them), %d of %d reverts; %d builds ahead in all",
			n, len(searched), revertsAhead, len(reverts), len(ahead))
	}
	t.Logf("%d boots and skips with builds ahead, %d without", len(boots[0]), len(boots[1]))
}

// notes keeps the commits of the progress notes heard, by text.
type notes struct {
	mu sync.Mutex
	by map[string]map[string]bool
}

func (n *notes) Emit(e progress.Event) {
	if e.Kind != progress.Note {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.by == nil {
		n.by = map[string]map[string]bool{}
	}
	if n.by[e.Text] == nil {
		n.by[e.Text] = map[string]bool{}
	}
	n.by[e.Text][e.Commit] = true
}

func (n *notes) commits(text string) map[string]bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.by[text]
}
