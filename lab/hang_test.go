package lab

import (
	"context"
	"strings"
	"testing"
	"time"

	"kbisect/configs"
	"kbisect/internal/simhost"
	"kbisect/internal/simlab"
	"kbisect/kbuild"
	"kbisect/verdict"
)

// TestAHostThatHangsMidMeasurementIsPowerCycled: a host that stops
// answering in the middle of a measurement does not come back by waiting;
// the run power-cycles it (boot.power_cycle) and goes on, nobody watching.
func TestAHostThatHangsMidMeasurementIsPowerCycled(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 7, Commits: 80})
	r.lab.Host.HangMeasurement(2)
	heard := &lines{}
	r.pipe.Progress = heard
	cal, err := r.pipe.Calibrate(context.Background(), r.lab.Tree.GoodCommit, r.lab.Tree.BadCommit)
	if err != nil {
		t.Fatalf("the hang stopped the run: %v\n%s", err, strings.Join(heard.notes, "\n"))
	}
	all := strings.Join(heard.notes, "\n")
	if !cal.Reproduced || !strings.Contains(all, "power-cycling it (boot.power_cycle)") || !strings.Contains(all, "after the power cycle") {
		t.Errorf("reproduced %v; progress:\n%s", cal.Reproduced, all)
	}
}

// TestAKernelThatHangsTheHostWhileMeasuredIsTheKernels: a kernel that
// boots, then hangs the whole host in the middle of every measurement
// (a lockup under the workload) is the commit's failure, as one that does
// not boot: the first hang could be the lab's, so the host is
// power-cycled and the kernel booted again; the second, with the lab
// proven to work, makes it a skip with its class, and the run goes on
// on a host that answers. Before, every retry cost a power cycle and the
// run stopped as the lab's failure.
func TestAKernelThatHangsTheHostWhileMeasuredIsTheKernels(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 5, Commits: 80})
	commit := r.faultyFirstBad(t, simhost.FaultHangsMeasuring)
	// A hung host is known when three keepalives go unanswered.
	r.job.Host.ConnectTimeout, r.job.Host.Keepalive = configs.Duration(time.Second), configs.Duration(time.Second)
	heard := &lines{}
	r.pipe.Progress = heard
	ev, err := r.pipe.Evidence(context.Background(), commit)
	all := strings.Join(heard.notes, "\n")
	if err != nil {
		t.Fatalf("the kernel's hang stopped the run: %v\n%s", err, all)
	}
	want := "hangs the host: it stopped answering in the middle of the workload on 2 boots of this kernel, and answered again after each power cycle"
	if ev.Verdict != verdict.Skip || ev.Reason != want {
		t.Errorf("verdict %s, reason %q\nwant %q", ev.Verdict, ev.Reason, want)
	}
	kept, err := ReadEvidence(r.state, commit)
	if err != nil || kept.Failure == nil || kept.Failure.Class != FailHang {
		t.Errorf("the skip's failure in the state: %+v %v", kept, err)
	}
	if n := strings.Count(all, "power-cycling it (boot.power_cycle)"); n != 2 {
		t.Errorf("%d power cycles, want 2 (one a hang):\n%s", n, all)
	}
	if got := r.lab.Host.Running().Release; !strings.HasPrefix(got, "6.1.0") {
		t.Errorf("after the second hang the host runs %s, not its own kernel", got)
	}
	// The next commit is measured on the host the hang left behind.
	next, err := r.pipe.Evidence(context.Background(), r.lab.Tree.GoodCommit)
	if err != nil || next.Verdict != verdict.Good {
		t.Errorf("the next commit: %+v %v", next, err)
	}
}

// faultyFirstBad gives the run's first bad commit's kernel the fault f on
// the emulated host, and returns the commit. The host boots in
// milliseconds: a kernel that is not back after two seconds never will
// be (job files may not say less than 30s, meant for real machines).
func (r *simRun) faultyFirstBad(t *testing.T, f simhost.Fault) string {
	t.Helper()
	commit := r.lab.Tree.Expected.FirstBad
	a, err := kbuild.Build(context.Background(), r.pipe.Build, 0, commit)
	if err != nil {
		t.Fatal(err)
	}
	r.lab.Host.SetFault(a.Release, f)
	r.job.Boot.Timeout = configs.Duration(2 * time.Second)
	return commit
}
