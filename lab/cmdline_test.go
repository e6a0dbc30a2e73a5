package lab

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/internal/atomicfile"
	"kbisect/internal/simlab"
	"kbisect/progress"
	"kbisect/remote"
)

// TestAResumedRunBootsFromTheBaseItRecorded: the first boot of a run
// records the host's own command line in the state directory; a resumed
// run boots from that record without asking the host again, whatever
// kernel the host runs by then.
func TestAResumedRunBootsFromTheBaseItRecorded(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 23, Commits: 60})
	own := r.lab.Host.Running().Cmdline
	file := filepath.Join(r.state, "base-cmdline.json")
	r.pipe.BaseFile = file
	var lines []string
	sink := progress.Func(func(e progress.Event) {
		if e.Kind == progress.Line {
			lines = append(lines, e.Text)
		}
	})
	r.pipe.Progress = sink
	ctx := context.Background()
	if _, err := r.pipe.Evidence(ctx, r.lab.Tree.GoodCommit); err != nil {
		t.Fatal(err)
	}
	var base remote.Base
	if err := atomicfile.ReadJSON(file, &base); err != nil || base.Cmdline != own || base.From != remote.BaseFromRunning {
		t.Fatalf("recorded %+v %v", base, err)
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "base command line recorded: ") {
		t.Errorf("said %q", lines)
	}
	// What the state holds is the base, not what the host says now.
	base.Cmdline = "root=/dev/sdb2 ro"
	if err := atomicfile.WriteJSON(file, base); err != nil {
		t.Fatal(err)
	}
	resumed := r.pipeline()
	resumed.BaseFile, resumed.Progress, lines = file, sink, nil
	if _, err := resumed.Evidence(ctx, r.lab.Tree.BadCommit); err != nil {
		t.Fatal(err)
	}
	if got := r.lab.Host.Running().Cmdline; !strings.HasPrefix(got, "root=/dev/sdb2 ro ") || strings.Contains(got, "sda") {
		t.Errorf("the resumed run booted with %q", got)
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "base command line as recorded before: ") {
		t.Errorf("said %q", lines)
	}
}
