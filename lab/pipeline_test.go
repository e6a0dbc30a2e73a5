package lab

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"golang.org/x/crypto/ssh"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/internal/shell"
	"kbisect/internal/simhost"
	"kbisect/internal/simlab"
	"kbisect/kbuild"
	"kbisect/noise"
	"kbisect/progress"
	"kbisect/remote"
	"kbisect/verdict"
)

// simRun is a bisection of a simulated lab through the real pipeline:
// builds by make and gcc, boots over SSH on the emulated host, osnoise
// output parsed and judged by the job's rule.
type simRun struct {
	lab   *simlab.Lab
	job   *configs.Job
	g     *bisect.Graph
	state string
	pipe  *Pipeline
}

func newSimRun(t *testing.T, opt simlab.Options) *simRun {
	t.Helper()
	l, err := simlab.New(t.TempDir(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	job, err := configs.Load(l.JobFile, configs.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := bisect.OpenGraph(context.Background(), l.Tree.Dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	r := &simRun{lab: l, job: job, g: g, state: t.TempDir()}
	r.pipe = r.pipeline()
	return r
}

// pipeline is a pipeline on the run's state directory, as a new kbisect
// process would make it.
func (r *simRun) pipeline() *Pipeline {
	return &Pipeline{Job: r.job, Build: BuildOptions(r.job, nil), StateDir: r.state,
		Backoff: time.Millisecond, Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }}
}

// bisect calibrates and drives the bisection to its end.
func (r *simRun) bisect(t *testing.T, ctx context.Context) (bisect.Result, *Calibration, error) {
	t.Helper()
	log, records, err := bisect.OpenState(filepath.Join(r.state, "session"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	bad, good := plumbing.NewHash(r.lab.Tree.BadCommit), plumbing.NewHash(r.lab.Tree.GoodCommit)
	if len(records) == 0 {
		if err := log.Init(bisect.Record{Event: bisect.EventStart, Bad: bad.String(), Good: []string{good.String()}}); err != nil {
			t.Fatal(err)
		}
	}
	sess, _, err := bisect.Restore(r.g, log.Records())
	if err != nil {
		t.Fatal(err)
	}
	cal, err := r.pipe.Calibrate(ctx, good.String(), bad.String())
	if err != nil || !cal.Reproduced {
		return bisect.Result{}, cal, err
	}
	res, err := bisect.Drive(ctx, sess, log, r.pipe.Test, quiet{})
	return res, cal, err
}

type quiet struct{}

func (quiet) Testing(bisect.Step)                                 {}
func (quiet) Tested(plumbing.Hash, bisect.Outcome, time.Duration) {}
func (quiet) Warn(string)                                         {}

func TestTheLabFindsThePlantedRegression(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 3, Commits: 120})
	res, cal, err := r.bisect(t, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !cal.Reproduced || cal.Bad.Verdict != "bad" || cal.Good.Verdict != "good" {
		t.Fatalf("calibration: %+v", cal)
	}
	if res.Kind != bisect.Found || res.FirstBad.String() != r.lab.Tree.Expected.FirstBad {
		t.Fatalf("found %v %s, the planted regression is %s (%+v)", res.Kind, res.FirstBad, r.lab.Tree.Expected.FirstBad, res)
	}
	// Every verdict agrees with the tree, and has its evidence kept.
	for _, tc := range res.Tested {
		ev, err := ReadEvidence(r.state, tc.Commit.String())
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !r.lab.Tree.Builds(tc.Commit.String()):
			if tc.Verdict != verdict.Skip || !strings.HasPrefix(ev.Reason, "does not build: ") {
				t.Errorf("%s does not build but is %v (%s)", tc.Commit, tc.Verdict, ev.Reason)
			}
		case r.lab.Tree.IsBad(tc.Commit.String()) != (tc.Verdict == verdict.Bad):
			t.Errorf("%s is %v (%s); bad in the tree: %v", tc.Commit, tc.Verdict, ev.Reason, r.lab.Tree.IsBad(tc.Commit.String()))
		}
		if ev.SameAs == "" && ev.Verdict != "skip" {
			raw := filepath.Join(r.state, "commits", tc.Commit.String(), "sample-1.out")
			if b, err := os.ReadFile(raw); err != nil || !strings.Contains(string(b), "# tracer: osnoise") {
				t.Errorf("%s: raw output of sample 1: %v", tc.Commit, err)
			}
			if len(ev.Boots) == 0 || !strings.HasSuffix(ev.Boots[0].Release, "-kbisect-"+tc.Commit.String()[:12]) {
				t.Errorf("%s was measured on %+v", tc.Commit, ev.Boots)
			}
		}
	}
	// The host ran the kernels it was asked to, with the job's parameters.
	if got := r.lab.Host.Running().Cmdline; !strings.Contains(got, simlab.BootParams) {
		t.Errorf("the host runs with %q", got)
	}
}

// TestAKernelThatDoesNotBootIsSkipped: a kernel that hangs until the
// lab power-cycles the host is the commit's failure, not the run's.
func TestAKernelThatDoesNotBootIsSkipped(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 5, Commits: 80})
	commit := r.faultyFirstBad(t, simhost.FaultNeverBack)
	ev, err := r.pipe.Evidence(context.Background(), commit)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Verdict != "skip" || !strings.HasPrefix(ev.Reason, "does not boot: ") {
		t.Errorf("%+v", ev)
	}
	// The state says why, by class: a resumed run or a report reads it.
	kept, err := ReadEvidence(r.state, commit)
	if err != nil || kept.Failure == nil || kept.Failure.Class != FailBoot || len(kept.Failure.Evidence) == 0 {
		t.Errorf("the skip's failure in the state: %+v %v", kept, err)
	}
	if !strings.HasPrefix(r.lab.Host.Running().Release, "6.1.0") {
		t.Errorf("after the power cycle the host runs %s", r.lab.Host.Running().Release)
	}
}

// TestARunResumesWhereItWasKilled: the evidence of a finished commit is
// kept, so a new pipeline (a new kbisect process) on the same state
// directory answers from it without building, booting or measuring.
func TestARunResumesWhereItWasKilled(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 7, Commits: 80})
	ctx := context.Background()
	if _, err := r.pipe.Calibrate(ctx, r.lab.Tree.GoodCommit, r.lab.Tree.BadCommit); err != nil {
		t.Fatal(err)
	}
	c := r.lab.Tree.Expected.FirstBad
	first, err := r.pipe.Evidence(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	boots := len(r.lab.Host.Boots())
	again := r.pipeline()
	if _, err := again.Calibrate(ctx, r.lab.Tree.GoodCommit, r.lab.Tree.BadCommit); err != nil {
		t.Fatal(err)
	}
	second, err := again.Evidence(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.lab.Host.Boots()) != boots || second.Verdict != first.Verdict || len(second.Values) != len(first.Values) {
		t.Errorf("resumed: %d boots (was %d), %s/%d values (was %s/%d)", len(r.lab.Host.Boots()), boots, second.Verdict, len(second.Values), first.Verdict, len(first.Values))
	}
	if again.Rule().Kind != noise.Absolute || len(again.Rule().Good) == 0 {
		t.Errorf("the resumed rule lacks the calibration: %+v", again.Rule())
	}
}

// TestTheSameKernelIsMeasuredOnce: a commit that changes only
// documentation builds its parent's code; its verdict is its parent's,
// without a boot.
func TestTheSameKernelIsMeasuredOnce(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 11, Commits: 120, DocPercent: 40})
	ctx := context.Background()
	if _, err := r.pipe.Calibrate(ctx, r.lab.Tree.GoodCommit, r.lab.Tree.BadCommit); err != nil {
		t.Fatal(err)
	}
	var doc, parent string
	for _, d := range r.lab.Tree.DocOnly {
		parents, err := r.g.Parents(plumbing.NewHash(d))
		if err == nil && len(parents) == 1 && r.lab.Tree.Builds(d) && r.lab.Tree.Builds(parents[0].String()) {
			doc, parent = d, parents[0].String()
			break
		}
	}
	if doc == "" {
		t.Fatal("the tree has no documentation-only commit")
	}
	p, err := r.pipe.Evidence(ctx, parent)
	if err != nil {
		t.Fatal(err)
	}
	boots := len(r.lab.Host.Boots())
	d, err := r.pipe.Evidence(ctx, doc)
	if err != nil {
		t.Fatal(err)
	}
	if d.SameAs != parent || d.Verdict != p.Verdict || d.Signature != p.Signature || len(r.lab.Host.Boots()) != boots {
		t.Errorf("documentation commit: same as %q (parent %s), verdict %s (parent %s), boots %d → %d", d.SameAs, parent[:12], d.Verdict, p.Verdict, boots, len(r.lab.Host.Boots()))
	}
}

// TestADroppedMeasurementCostsABootNotTheRun: the lab drops the SSH
// connection in the middle of a sample; the kernel is booted again and
// sampling goes on.
func TestADroppedMeasurementCostsABootNotTheRun(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 13, Commits: 80})
	var notes []string
	r.pipe.Progress = progress.Func(func(e progress.Event) {
		if e.Kind == progress.Phase && e.Text != "" {
			notes = append(notes, e.Text)
		}
	})
	r.lab.Host.DropMeasurement(2) // the second sample from now
	ev, err := r.pipe.Evidence(context.Background(), r.lab.Tree.Expected.FirstBad)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Verdict != "bad" || len(ev.Boots) != 2 || ev.Boots[0].Samples != 1 || len(ev.Values) < 3 {
		t.Errorf("verdict %s, boots %+v, %d values", ev.Verdict, ev.Boots, len(ev.Values))
	}
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "the lab dropped the measurement (") {
		t.Errorf("notes %q", notes)
	}
}

// TestAFlakyHostIsRetriedAndADeadOneStopsTheRun: connections the host
// refuses are the lab's failure: retried with backoff; a host that still
// refuses after its power cycle ends the test with an error that says so,
// never a verdict.
func TestAFlakyHostIsRetriedAndADeadOneStopsTheRun(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 17, Commits: 80})
	ctx := context.Background()
	good := r.lab.Tree.GoodCommit
	r.lab.Host.RefuseConnections(1)
	if ev, err := r.pipe.Evidence(ctx, good); err != nil || ev.Verdict != "good" {
		t.Fatalf("after one refused connection: %+v %v", ev, err)
	}
	bad := r.lab.Tree.BadCommit
	r.lab.Host.RefuseConnections(1000)
	_, err := r.pipe.Evidence(ctx, bad)
	var ie *remote.InfraError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "the host stopped answering, and power-cycling it (boot.power_cycle) did not bring it back") {
		t.Fatalf("a host that refuses every connection: %v", err)
	}
	if _, err := ReadEvidence(r.state, bad); !os.IsNotExist(err) {
		t.Errorf("a commit the lab could not test has evidence: %v", err)
	}
}

// TestAWrongKernelIsNeverMeasured: a host that boots another kernel than
// the one asked for (a boot loader that ignores kbisect) is the lab's
// failure: retried, then the run stops with what ran instead — no
// verdict from the wrong kernel's numbers.
func TestAWrongKernelIsNeverMeasured(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 19, Commits: 80})
	commit := r.lab.Tree.Expected.FirstBad
	a, err := kbuild.Build(context.Background(), r.pipe.Build, 0, commit)
	if err != nil {
		t.Fatal(err)
	}
	r.lab.Host.SetFault(a.Release, simhost.FaultWrongRelease)
	measured := r.lab.Host.Measurements()
	ev, err := r.pipe.Evidence(context.Background(), commit)
	if err == nil || !strings.Contains(err.Error(), "the lab failed 3 times") || !strings.Contains(err.Error(), "the host booted "+simhost.WrongRelease+" again instead of ") {
		t.Errorf("got %v, %+v", err, ev)
	}
	if r.lab.Host.Measurements() != measured {
		t.Error("the wrong kernel was measured")
	}
}

// TestAnAutoThresholdComesFromTheEndpoints: with threshold auto the rule
// is set at calibration from both endpoints' samples, and the bisection
// still finds the regression.
func TestAnAutoThresholdComesFromTheEndpoints(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 21, Commits: 80})
	r.job.Verdict.Threshold = configs.Threshold{Kind: configs.ThresholdAuto}
	res, cal, err := r.bisect(t, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cal.Rule.Kind != noise.Auto || len(cal.Rule.Good) != 5 || len(cal.Rule.Bad) != 5 || !cal.Reproduced {
		t.Errorf("calibration: %+v", cal)
	}
	if res.Kind != bisect.Found || res.FirstBad.String() != r.lab.Tree.Expected.FirstBad {
		t.Errorf("found %v %s, want %s", res.Kind, res.FirstBad, r.lab.Tree.Expected.FirstBad)
	}
}

// TestSamplesAreSpreadOverTheJobsBoots: verdict.boots 2 boots the kernel
// twice, each boot giving its share of the minimum samples.
func TestSamplesAreSpreadOverTheJobsBoots(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 23, Commits: 80})
	r.job.Verdict.Boots = 2
	ev, err := r.pipe.Evidence(context.Background(), r.lab.Tree.Expected.FirstBad)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Boots) != 2 || ev.Boots[0].Samples != 2 || ev.Boots[0].BootID == ev.Boots[1].BootID || ev.Verdict != "bad" {
		t.Errorf("boots %+v, verdict %s", ev.Boots, ev.Verdict)
	}
}

// TestATestStoppedMidBootLeavesTheHostToComeBack: a test stopped while
// the host reboots into its kernel (a pool made way for a more useful
// commit) leaves a host that does not answer for a while; the next test
// on that machine waits for it instead of calling it a lab failure.
func TestATestStoppedMidBootLeavesTheHostToComeBack(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 3, Commits: 120})
	var mu sync.Mutex
	var notes []string
	r.pipe.Progress = progress.Func(func(e progress.Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Text != "" {
			notes = append(notes, e.Text)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	traced := shell.WithTracer(ctx, func(where, command string) {
		if strings.HasPrefix(command, "# kbisect:kexec") {
			go func() { time.Sleep(20 * time.Millisecond); cancel() }() // the host is rebooting
		}
	})
	if _, err := r.pipe.Evidence(traced, r.lab.Tree.BadCommit); !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped mid-boot: %v", err)
	}
	ev, err := r.pipe.Evidence(context.Background(), r.lab.Tree.GoodCommit)
	if err != nil || ev.Verdict != "good" {
		t.Fatalf("the next test: %+v, %v", ev, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, "waiting for the host") }) ||
		slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, "retrying") }) {
		t.Errorf("notes: %q", notes)
	}
}

// TestAChangedHostKeyStopsAtOnce: a host key other than the one recorded
// is not a flaky lab: no retry, no backoff, and the error says what to
// do.
func TestAChangedHostKeyStopsAtOnce(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 23, Commits: 80})
	_, other, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(other)
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ := strings.Cut(r.lab.Host.KnownHostsLine, " ")
	if err := os.WriteFile(r.lab.KnownHosts, []byte(host+" "+string(ssh.MarshalAuthorizedKey(signer.PublicKey()))), 0o600); err != nil {
		t.Fatal(err)
	}
	waits := 0
	r.pipe.Sleep = func(ctx context.Context, d time.Duration) error { waits++; return ctx.Err() }
	_, err = r.pipe.Evidence(context.Background(), r.lab.Tree.GoodCommit)
	var hk *remote.HostKeyError
	if !errors.As(err, &hk) || !hk.Changed || !strings.Contains(err.Error(), "stopped at once") || !strings.Contains(err.Error(), "ssh-keygen -f "+r.lab.KnownHosts+" -R") {
		t.Fatalf("got %T %v", err, err)
	}
	if waits != 0 {
		t.Errorf("a changed host key was retried after %d waits", waits)
	}
}

// TestACommitThatDoesNotBuildRecordsItsErrorLines: a skip for a compile
// error keeps its class and the compiler's lines in the state.
func TestACommitThatDoesNotBuildRecordsItsErrorLines(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 31, Commits: 80})
	if len(r.lab.Tree.Broken) == 0 {
		t.Fatal("the simulated history has no commit that does not build")
	}
	broken := r.lab.Tree.Broken[0]
	ev, err := r.pipe.Evidence(context.Background(), broken)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := ReadEvidence(r.state, broken)
	if err != nil || ev.Verdict != "skip" || kept.Failure == nil || kept.Failure.Class != FailBuild || len(kept.Failure.Evidence) == 0 || !strings.Contains(kept.Failure.Evidence[0], "error") {
		t.Errorf("got %+v (kept %+v, %v)", ev, kept, err)
	}
}

// TestAKernelThatPanicsAfterAnotherTestKernelIsSkipped: mid-run the host
// runs the last test kernel; one that panics reboots through the firmware
// to the host's own kernel, not to the one before. That is the kernel's
// failure (a skip), not a wrong kernel from the lab.
func TestAKernelThatPanicsAfterAnotherTestKernelIsSkipped(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 37, Commits: 80})
	ctx := context.Background()
	if ev, err := r.pipe.Evidence(ctx, r.lab.Tree.GoodCommit); err != nil || ev.Verdict != "good" {
		t.Fatalf("the good endpoint: %+v %v", ev, err)
	}
	if !strings.Contains(r.lab.Host.Running().Release, "-kbisect-") {
		t.Fatalf("the host runs %s, not the last test kernel", r.lab.Host.Running().Release)
	}
	commit := r.lab.Tree.Expected.FirstBad
	a, err := kbuild.Build(ctx, r.pipe.Build, 0, commit)
	if err != nil {
		t.Fatal(err)
	}
	r.lab.Host.SetFault(a.Release, simhost.FaultPanicReboot)
	ev, err := r.pipe.Evidence(ctx, commit)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Verdict != "skip" || ev.Failure == nil || ev.Failure.Class != FailBoot {
		t.Errorf("%+v", ev)
	}
}

// cancelAt cancels its context when the pipeline begins to measure commit.
type cancelAt struct {
	commit   string
	cancel   context.CancelFunc
	mu       sync.Mutex
	measured map[string]int
}

func (c *cancelAt) Emit(e progress.Event) {
	if e.Kind != progress.Phase || e.Phase != string(PhaseMeasure) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.measured == nil {
		c.measured = map[string]int{}
	}
	c.measured[e.Commit]++
	if e.Commit == c.commit && c.cancel != nil {
		c.cancel()
	}
}

// TestCalibrationKeepsEachEndpointAsItEnds: kbisect killed while the good
// endpoint is measured measures only the good one when it resumes.
func TestCalibrationKeepsEachEndpointAsItEnds(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 7, Commits: 80})
	good, bad := r.lab.Tree.GoodCommit, r.lab.Tree.BadCommit
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	killed := &cancelAt{commit: good, cancel: cancel}
	r.pipe.Progress = killed
	if _, err := r.pipe.Calibrate(ctx, good, bad); err == nil {
		t.Fatal("the calibration ended though cancelled as the good endpoint was measured")
	}
	if killed.measured[bad] == 0 || killed.measured[good] == 0 {
		t.Fatalf("before the kill, measured %v", killed.measured)
	}
	again := r.pipeline()
	resumed := &cancelAt{}
	again.Progress = resumed
	cal, err := again.Calibrate(context.Background(), good, bad)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.measured[bad] != 0 || resumed.measured[good] == 0 {
		t.Errorf("resumed, measured %v: the bad endpoint %s again", resumed.measured, bad[:12])
	}
	if !cal.Reproduced || len(cal.Bad.Values) == 0 || cal.Bad.Verdict != verdict.Bad {
		t.Errorf("calibration: reproduced %v, bad %s with %d values", cal.Reproduced, cal.Bad.Verdict, len(cal.Bad.Values))
	}
	if _, err := os.Stat(filepath.Join(r.state, "calibration-endpoints.json")); !os.IsNotExist(err) {
		t.Errorf("the endpoints measured so far outlive the calibration: %v", err)
	}
}

// lines keeps the pipeline's progress notes.
type lines struct {
	mu    sync.Mutex
	notes []string
}

func (l *lines) Emit(e progress.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notes = append(l.notes, e.Text)
}
