package kbuild

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestASourceRewrittenInTheTickOfItsObjectIsStillCompiled(t *testing.T) {
	// A filesystem stamps times by a coarse clock: when git rewrites a
	// source in the tick in which the slot's last build wrote its object,
	// the object looks as new as the source and make links the old one —
	// another commit's kernel under this one's key (a simulated-lab run
	// measured the planted commit good five times from such a kernel).
	// The tick is made long here: every file the first build wrote is
	// dated 1.5 s ahead, as one tick of a coarse clock would have it.
	_, commits, o, a := eventpollTree(t)
	compiled(t, o, 0)
	outs, _ := filepath.Glob(filepath.Join(o.CacheDir, "slots", "*", "slot-0", "out"))
	if len(outs) != 1 {
		t.Fatalf("slot output: %v", outs)
	}
	ahead := time.Now().Add(1500 * time.Millisecond)
	err := filepath.WalkDir(outs[0], func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(p, ahead, ahead)
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(context.Background(), o, 0, commits[1])
	if err != nil {
		t.Fatal(err)
	}
	if got := compiled(t, o, 0); len(got) != 1 || !strings.HasSuffix(got[0], "kernel/eventpoll.c") {
		t.Errorf("the second commit compiled %q, want eventpoll.c", got)
	}
	if a.Signature == b.Signature {
		t.Error("the second commit's kernel is the first one's: its changed source was not compiled")
	}
}
