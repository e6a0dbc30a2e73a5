package lab

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/internal/simhost"
	"kbisect/internal/simlab"
	"kbisect/verdict"
)

// TestThreeMachinesFindWhatOneFinds: with three identical machines the
// bisection tests the next commits ahead on the others; the answer and
// every verdict the session records are those of one machine.
func TestThreeMachinesFindWhatOneFinds(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 3, Commits: 120})
	pool := &Pool{Pipes: []*Pipeline{r.pipe}}
	for i := 1; i < 3; i++ {
		file, _, err := r.lab.AddHost()
		if err != nil {
			t.Fatal(err)
		}
		job, err := configs.Load(file, configs.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q := &Pipeline{Job: job, Build: BuildOptions(job, nil), StateDir: r.state, Slot: i, Name: job.Machine.Name,
			Backoff: time.Millisecond, Sleep: r.pipe.Sleep}
		pool.Pipes = append(pool.Pipes, q)
	}
	g2, err := bisect.OpenGraph(context.Background(), r.lab.Tree.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	log, _, err := bisect.OpenState(filepath.Join(r.state, "session"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	bad, good := r.lab.Tree.BadCommit, r.lab.Tree.GoodCommit
	if err := log.Init(bisect.Record{Event: bisect.EventStart, Bad: bad, Good: []string{good}}); err != nil {
		t.Fatal(err)
	}
	sess, _, err := bisect.Restore(r.g, log.Records())
	if err != nil {
		t.Fatal(err)
	}
	pool.Session, pool.Graph = sess, g2
	defer pool.Close()
	ctx := context.Background()
	if cal, err := pool.Calibrate(ctx, good, bad); err != nil || !cal.Reproduced {
		t.Fatalf("calibration: %+v %v", cal, err)
	}
	res, err := bisect.Drive(ctx, sess, log, pool.Test, quiet{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Kind != bisect.Found || res.FirstBad.String() != r.lab.Tree.Expected.FirstBad {
		t.Fatalf("found %v %s, want %s", res.Kind, res.FirstBad, r.lab.Tree.Expected.FirstBad)
	}
	for i, h := range append([]*simhost.Host{r.lab.Host}, r.lab.Hosts...) {
		if len(h.Boots()) == 0 {
			t.Errorf("machine %d never booted a kernel", i+1)
		}
	}
	for _, tc := range res.Tested {
		if r.lab.Tree.Builds(tc.Commit.String()) && r.lab.Tree.IsBad(tc.Commit.String()) != (tc.Verdict == verdict.Bad) {
			t.Errorf("%s is %v", tc.Commit, tc.Verdict)
		}
	}
}

// TestAConfirmationSaysWhenTheFirstBadCommitIsNotItsCode: a bisection
