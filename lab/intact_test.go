package lab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/internal/simlab"
	"kbisect/kbuild"
	"kbisect/progress"
	"kbisect/verdict"
)

// TestADamagedKernelIsBuiltAgainBeforeItIsInstalled: a cached kernel
// whose image is cut short after the build found it (a power loss, a
// disk) is built again before it goes to the host: the host gets the
// whole image and the commit its true verdict, not a kernel failure or
// the noise of a kernel that is not its own.
func TestADamagedKernelIsBuiltAgainBeforeItIsInstalled(t *testing.T) {
	r := newSimRun(t, simlab.Options{Seed: 5, Commits: 80})
	commit := r.lab.Tree.Expected.FirstBad
	ctx := context.Background()
	a, err := kbuild.Build(ctx, r.pipe.Build, 0, commit)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(a.Dir, "bzImage")
	image, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	r.pipe.Progress = progress.Func(func(e progress.Event) {
		if e.Phase == string(PhaseBuild) && e.Text == "from the cache" {
			if err := os.Truncate(path, 5); err != nil {
				t.Error(err)
			}
		}
		if e.Text != "" {
			notes = append(notes, e.Text)
		}
	})
	ev, err := r.pipe.Evidence(ctx, commit)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Verdict != verdict.Bad {
		t.Errorf("the first bad commit is %s: %s", ev.Verdict, ev.Reason)
	}
	if _, ok := r.lab.Host.Noise(a.Release); !ok {
		t.Error("the host got an image without the kernel's noise level: not the whole image")
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, image) {
		t.Errorf("the cache holds a %d-byte image, the build wrote %d bytes", len(got), len(image))
	}
	want := fmt.Sprintf("artifact %s: bzImage is 5 bytes, the build wrote %d: building it again", a.Dir, len(image))
	if !strings.Contains(strings.Join(notes, "\n"), want) {
		t.Errorf("the progress does not say %q:\n%s", want, strings.Join(notes, "\n"))
	}
}
