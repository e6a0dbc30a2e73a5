package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kbisect/internal/simlab"
	"kbisect/report"
)

// journal reads a state directory's search journal: each boot's kind and
// machine, in order.
func journal(t *testing.T, state string) []struct{ Kind, Machine string } {
	t.Helper()
	f, err := os.Open(filepath.Join(state, "search.jsonl"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []struct{ Kind, Machine string }
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r struct{ Kind, Machine string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// threeMachines is a simulated lab of three machines and the arguments
// of a posterior run on all of them.
func threeMachines(t *testing.T, opt simlab.Options) (*simlab.Lab, string, []string) {
	l := simLab(t, opt)
	state := filepath.Join(t.TempDir(), "state")
	args := []string{"run", "--job", l.JobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", state, "--json"}
	for i := 0; i < 2; i++ {
		file, _, err := l.AddHost()
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "--job", file)
	}
	return l, state, args
}

// TestRunJobPosteriorOnThreeMachines: the posterior search runs on the
// three job files' machines at once into one journal; stopped midway (as
// when the computer running kbisect reboots) it resumes from the
// journal; a machine that stops answering for good in the middle of the
// run is left, and the other two find the commit.
func TestRunJobPosteriorOnThreeMachines(t *testing.T) {
	l, state, args := threeMachines(t, simlab.Options{Seed: 4, Commits: 400})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if len(journal(t, state)) >= 12 {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	code, _, stderr := runCLI(t, ctx, args...)
	first := journal(t, state)
	if code != exitInterrupted || len(first) < 12 {
		t.Fatalf("stopped after 12 boots: exit %d, %d boots journaled\n%s", code, len(first), stderr)
	}

	// simlab-3 is killed as soon as a boot of it ends in the resumed run:
	// its next boot finds it gone (a host killed while kbisect waits for
	// its kernel to come up would be found lost only at boot.timeout,
	// 30 s, when the run may have ended).
	killed := l.Hosts[1]
	gone, ran := make(chan int, 1), make(chan struct{})
	go func() {
		for {
			select {
			case <-ran:
				return
			default:
			}
			all := journal(t, state)
			for _, r := range all[len(first):] {
				if r.Machine == "simlab-3" {
					killed.Kill() // it stops answering, for good, and cannot be power-cycled
					gone <- len(all)
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	code, stdout, stderr := runCLI(t, context.Background(), args...)
	close(ran)
	var out report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitOK || out.FirstBad != l.Tree.Expected.FirstBad {
		t.Fatalf("exit %d, first bad %s, want %s: %v\n%s", code, out.FirstBad, l.Tree.Expected.FirstBad, err, stderr)
	}
	at := -1
	select {
	case at = <-gone:
	default:
		t.Fatalf("simlab-3 ended no boot in the resumed run:\n%s", stderr)
	}
	if !strings.Contains(stderr, "resuming from "+state) || !strings.Contains(stderr, "simlab-3 is lost for this run") {
		t.Errorf("the resumed run does not say it resumed and lost simlab-3:\n%s", stderr)
	}
	all := journal(t, state)
	for i, r := range first {
		if all[i] != r {
			t.Fatalf("boot %d of the first run is %+v in the journal now, was %+v", i+1, all[i], r)
		}
	}
	on := map[string]int{}
	for i, r := range all {
		on[r.Machine]++
		// A boot that was under way on simlab-3 when it stopped may
		// have ended first; none begun after.
		if r.Machine == "simlab-3" && i > at+1 {
			t.Errorf("boot %d (%s) on simlab-3, which stopped answering at boot %d", i+1, r.Kind, at)
		}
	}
	for _, m := range []string{"simlab", "simlab-2", "simlab-3"} {
		if on[m] < 3 {
			t.Errorf("%s booted %d times: %v", m, on[m], on)
		}
	}
	t.Logf("%d boots, %v; simlab-3 stopped answering at boot %d", len(all), on, at)
}

// TestRunJobPosteriorGoesOnWithoutAMachineThatFailsItsPreflight: of
// three machines, one that does not answer at the start is left out and
// the other two find the commit.
func TestRunJobPosteriorGoesOnWithoutAMachineThatFailsItsPreflight(t *testing.T) {
	l, state, args := threeMachines(t, simlab.Options{Seed: 6, Commits: 120})
	l.Hosts[0].Close()
	code, stdout, stderr := runCLI(t, context.Background(), args...)
	var out report.RunJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitOK || out.FirstBad != l.Tree.Expected.FirstBad {
		t.Fatalf("exit %d, first bad %s, want %s: %v\n%s", code, out.FirstBad, l.Tree.Expected.FirstBad, err, stderr)
	}
	if !strings.Contains(stderr, "simlab-2 (") || !strings.Contains(stderr, "is left out of this run, the other machines go on") {
		t.Errorf("the run does not say simlab-2 is left out:\n%s", stderr)
	}
	on := map[string]int{}
	for _, r := range journal(t, state) {
		on[r.Machine]++
	}
	if on["simlab-2"] != 0 || on["simlab"] == 0 || on["simlab-3"] == 0 {
		t.Errorf("boots by machine: %v", on)
	}
}
