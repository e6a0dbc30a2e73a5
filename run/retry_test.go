package run

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/internal/simhost"
	"kbisect/internal/simlab"
	"kbisect/kbuild"
	"kbisect/lab"
)

// TestRetrySkipsMeasuresTheCommitsARunSkipped: a run whose first bad
// commit was skipped (its boots failed: a lab fault an older kbisect
// took for the kernel's) ends inconclusive; once the lab is fixed, the
// same command with --retry-skips measures that commit again and finds
// it, the old evidence kept aside.
func TestRetrySkipsMeasuresTheCommitsARunSkipped(t *testing.T) {
	l := newSimLab(t, simlab.Options{Seed: 5, Commits: 80})
	job, err := configs.Load(l.JobFile, configs.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := l.Tree.Expected.FirstBad
	a, err := kbuild.Build(context.Background(), lab.BuildOptions(job, nil), 0, want)
	if err != nil {
		t.Fatal(err)
	}
	l.Host.SetFault(a.Release, simhost.FaultKexecRejected)
	var msgs bytes.Buffer
	o := JobOptions{Range: Range{Goods: []string{l.Tree.Good}, Bad: l.Tree.Bad}, Jobs: []string{l.JobFile},
		State: filepath.Join(t.TempDir(), "state"), Messages: &msgs, NoBuildAhead: true}
	res, err := Job(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, msgs.String())
	}
	res.Close()
	if res.Kind != bisect.Inconclusive {
		t.Fatalf("with the first bad commit skipped: %s %s", res.Kind, res.JSON.FirstBad)
	}

	l.Host.SetFault(a.Release, simhost.FaultNone)
	msgs.Reset()
	o.RetrySkips = true
	res, err = Job(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, msgs.String())
	}
	defer res.Close()
	if res.Kind != bisect.Found || res.JSON.FirstBad != want {
		t.Errorf("with --retry-skips: %s %s, want found %s\n%s", res.Kind, res.JSON.FirstBad, want, msgs.String())
	}
	if !strings.Contains(msgs.String(), "kbisect: --retry-skips: ") || !strings.Contains(msgs.String(), want[:12]) {
		t.Errorf("the run did not say what it measures again:\n%s", msgs.String())
	}
	aside := filepath.Join(o.State, lab.SkippedJournal)
	if b, err := os.ReadFile(aside); err != nil || !strings.Contains(string(b), want) {
		t.Errorf("the skip's evidence was not kept aside in %s: %v", aside, err)
	}
	journal, _ := os.ReadFile(filepath.Join(o.State, "search.jsonl"))
	if strings.Contains(string(journal), `"skip"`) {
		t.Errorf("the journal still holds a skip:\n%s", journal)
	}
}
