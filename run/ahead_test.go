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
// the pipeline's slot, and the next step finds its kernel in the cache.
// What is measured does not change: the same boots, in the same order,
// as with --no-build-ahead, and the same answer.
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
		for _, rec := range j.Records() {
			boots[i] = append(boots[i], rec.Kind+" "+rec.Commit+" "+rec.Built)
			if rec.Kind == lab.SearchBoot {
				searched[rec.Commit] = true
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
		t.Logf("%d of the %d kernels the search booted were built ahead; %d builds ahead in all", n, len(searched), len(ahead))
	}
	if strings.Join(boots[0], "\n") != strings.Join(boots[1], "\n") {
		t.Errorf("building ahead changed what was measured:\n%s\nwithout:\n%s", strings.Join(boots[0], "\n"), strings.Join(boots[1], "\n"))
	}
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
