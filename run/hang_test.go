package run

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"kbisect/configs"
	"kbisect/internal/simhost"
	"kbisect/internal/simlab"
	"kbisect/kbuild"
	"kbisect/lab"
)

// TestThePosteriorSearchSkipsAKernelThatHangsTheHost: a kernel that hangs
// the host in the middle of the workload on two boots is the kernel's
// failure, also when samples came before the hang: the search skips it
// (the journal keeps why) instead of judging it by its first samples.
func TestThePosteriorSearchSkipsAKernelThatHangsTheHost(t *testing.T) {
	l := newSimLab(t, simlab.Options{Seed: 5, Commits: 80})
	data, err := os.ReadFile(l.JobFile)
	if err != nil {
		t.Fatal(err)
	}
	// A hung host is known after three unanswered keepalives.
	for _, r := range [][2]string{{"connect_timeout: 5s", "connect_timeout: 1s"}, {"keepalive: 5s", "keepalive: 1s"}} {
		if !bytes.Contains(data, []byte(r[0])) {
			t.Fatalf("the lab's job has no %q", r[0])
		}
		data = bytes.Replace(data, []byte(r[0]), []byte(r[1]), 1)
	}
	if err := os.WriteFile(l.JobFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	job, err := configs.Load(l.JobFile, configs.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hangs := l.Tree.Expected.FirstBad
	a, err := kbuild.Build(context.Background(), lab.BuildOptions(job, nil), 0, hangs)
	if err != nil {
		t.Fatal(err)
	}
	l.Host.SetFault(a.Release, simhost.FaultHangsMeasuring)
	var msgs bytes.Buffer
	o := JobOptions{Range: Range{Goods: []string{l.Tree.Good}, Bad: l.Tree.Bad}, Jobs: []string{l.JobFile},
		State: filepath.Join(t.TempDir(), "state"), Messages: &msgs, NoBuildAhead: true}
	res, err := Job(context.Background(), o)
	if err != nil {
		t.Fatalf("the kernel's hangs stopped the run: %v\n%s", err, msgs.String())
	}
	res.Close()
	j, err := lab.OpenSearchJournal(o.State)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var skipped, measured int
	for _, rec := range j.Records() {
		if rec.Commit != hangs {
			continue
		}
		switch {
		case rec.Kind == lab.SearchSkip && rec.Failure != nil && rec.Failure.Class == lab.FailHang:
			skipped++
		case rec.Kind == lab.SearchBoot && !rec.Reverted:
			measured++
		}
	}
	if skipped != 1 || measured != 0 {
		t.Errorf("the hanging kernel: %d skips for its hangs, %d boots judged by their samples; want 1 and 0 (result %s %s)", skipped, measured, res.Kind, res.JSON.FirstBad)
	}
	if res.JSON.FirstBad == hangs {
		t.Errorf("the run named the kernel it could not measure: %s", res.Kind)
	}
}
