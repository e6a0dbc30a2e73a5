package kbuild

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// elsewhere is a build server that is this machine with a cache of its
// own: it builds with Build and copies the artifact, then lets the test
// change the copy (a transfer that went wrong).
type elsewhere struct {
	cache  string
	calls  int
	change func(dir string)
}

var _ Server = (*elsewhere)(nil)

func (e *elsewhere) Build(ctx context.Context, o Options, slot int, commit, dir string) error {
	e.calls++
	o.CacheDir, o.Server = e.cache, nil
	a, err := Build(ctx, o, slot, commit)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(a.Dir)
	if err != nil {
		return err
	}
	for _, en := range entries {
		b, err := os.ReadFile(filepath.Join(a.Dir, en.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, en.Name()), b, 0o644); err != nil {
			return err
		}
	}
	if e.change != nil {
		e.change(dir)
	}
	return nil
}

func TestAServerHostsArtifactIsCheckedThenPublishedAndCached(t *testing.T) {
	tree, commits := fakeTree(t)
	o := buildOptions(t, tree)
	srv := &elsewhere{cache: t.TempDir(), change: func(dir string) {
		f, err := os.OpenFile(filepath.Join(dir, "bzImage"), os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			_, _ = f.WriteString("x")
			f.Close()
		}
	}}
	o.Server = srv
	ctx := context.Background()
	_, err := Build(ctx, o, 0, commits[0])
	if err == nil || !strings.Contains(err.Error(), "came back damaged") || !strings.Contains(err.Error(), "bzImage") {
		t.Fatalf("a damaged transfer: %v", err)
	}
	if left, _ := os.ReadDir(filepath.Join(o.CacheDir, "artifacts")); len(left) != 0 {
		t.Errorf("a damaged transfer left %v in the cache", left)
	}
	srv.change = nil
	a, err := Build(ctx, o, 0, commits[0])
	if err != nil || a.Cached || a.Dir != filepath.Join(o.CacheDir, "artifacts", a.Key) || Check(a.Dir) != nil {
		t.Fatalf("built there: %+v %v", a, err)
	}
	b, err := Build(ctx, o, 0, commits[0])
	if err != nil || !b.Cached || b.Key != a.Key || srv.calls != 2 {
		t.Errorf("again: cached %v, %d server builds (want 2), %v", b.Cached, srv.calls, err)
	}
}

func TestAFailuresJSONGivesBackItsType(t *testing.T) {
	for _, err := range []error{
		&BuildError{Commit: "abc", Lines: []string{"main.c:1: error: x"}},
		&ConfigError{Commit: "abc", Dropped: []Dropped{{Option: Option{Name: "CONFIG_X", Value: "y", From: "f:1"}, Got: "n"}}},
	} {
		if got := FailureOf(err).Err("server"); !reflect.DeepEqual(got, err) {
			t.Errorf("%#v came back as %#v", err, got)
		}
	}
	se := FailureOf(&SetupError{Fault: FaultDisk, Msg: hintDisk, Evidence: []string{"0 bytes free"}}).Err("build server b")
	var back *SetupError
	if !errors.As(se, &back) || back.Fault != FaultDisk || back.Msg != "build server b: "+hintDisk || back.Evidence[0] != "0 bytes free" {
		t.Errorf("a setup error came back as %#v", se)
	}
	if other := FailureOf(errors.New("no such rev")).Err("build server b"); other.Error() != "build server b: no such rev" {
		t.Errorf("another error came back as %v", other)
	}
}
