package kbuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Server is a build server: a machine that builds the kernel of a commit
// with kbisect's own kbuild (so that its artifact is the one a build here
// would make) and hands the artifact back. Build consults the local cache
// first; only a kernel it does not have is built on the server.
type Server interface {
	// Build builds commit there with o's inputs, in one of the server's
	// slots, make's output going to o.Log as it comes, and unpacks the
	// artifact's files and meta.json into dir (empty, on this machine).
	// A commit that does not build is a *BuildError (or *ConfigError),
	// a server that cannot build a *SetupError or a connection's error.
	Build(ctx context.Context, o Options, slot int, commit, dir string) error
}

var keyName = regexp.MustCompile(`^[0-9a-f]{16,128}$`)

// buildOn builds commit on the build server and publishes its artifact in
// the local cache under its key, after checking every file against the
// meta.json the server's build wrote.
func (o Options) buildOn(ctx context.Context, slot int, commit, inputs string, start time.Time) (*Artifact, error) {
	tmp, err := o.staging("server-" + commit[:12])
	if err != nil {
		return nil, err
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(tmp)
		}
	}()
	// sweep removes a .tmp an hour old: a cold build there can take
	// longer, so the directory is kept fresh while it runs.
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(10 * time.Minute)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				_ = os.Chtimes(tmp, now, now)
			}
		}
	}()
	err = o.Server.Build(ctx, o, slot, commit, tmp)
	close(stop)
	if err != nil {
		return nil, err
	}
	keep = true // adopt removes it
	a, err := o.adopt(tmp, commit, "", inputs, start)
	if err != nil {
		return nil, fmt.Errorf("build server: %v", err)
	}
	if !a.Cached {
		o.logf("%s: built on the build server, its artifact checked and published in %s", commit[:12], a.Dir)
	}
	return a, nil
}

// staging makes an empty directory for an artifact that comes from
// elsewhere, beside the cache's artifacts; a .tmp name, so sweep removes
// it once stale when this process dies.
func (o Options) staging(prefix string) (string, error) {
	root := filepath.Join(o.CacheDir, "artifacts")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(root, prefix+".*.tmp")
}

// adopt checks the artifact of commit that came into tmp from elsewhere
// (a build server, the HTTP cache) file by file against its meta.json,
// its key too when one was asked for, and publishes it in the local cache
// under its key. tmp is removed, unless it became the artifact.
func (o Options) adopt(tmp, commit, key, inputs string, start time.Time) (*Artifact, error) {
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(tmp)
		}
	}()
	a, err := loadArtifact(tmp)
	if err != nil {
		return nil, fmt.Errorf("its artifact of %s has no readable meta.json: %v", commit[:12], err)
	}
	switch {
	case a.Commit != commit:
		return nil, fmt.Errorf("asked for %s, its artifact is of %q", commit, a.Commit)
	case !keyName.MatchString(a.Key):
		return nil, fmt.Errorf("its artifact's key %q is not a cache key", a.Key)
	case key != "" && a.Key != key:
		return nil, fmt.Errorf("its artifact's key %q is not %q, the key asked for", a.Key, key)
	}
	var de *DamagedError
	if err := Check(tmp); errors.As(err, &de) {
		return nil, fmt.Errorf("the artifact of %s came back damaged: %v", commit[:12], err)
	} else if err != nil {
		return nil, err
	}
	dir := filepath.Join(o.CacheDir, "artifacts", a.Key)
	if c := o.cachedAt(dir); c != nil {
		o.remember(inputs, a.Key)
		c.Cached, c.Took = true, time.Since(start)
		return c, nil
	}
	a.Dir, a.Cached = dir, false
	a.Took = time.Since(start)
	a.Seconds = a.Took.Seconds()
	keep = true // publish removes it when it fails
	if a, err = o.publish(tmp, a); err != nil {
		return nil, err
	}
	o.remember(inputs, a.Key)
	if o.CacheSize > 0 {
		if _, err := Evict(o.CacheDir, o.CacheSize, dir); err != nil {
			o.logf("cache: eviction stopped: %v", err)
		}
	}
	return a, nil
}

// Failure is a failed build as `kbisect build --json` reports it, so that
// a controller that ran it on a build server gets the same typed error
// back: Kind is "build" (*BuildError), "config" (*ConfigError), "setup"
// (*SetupError, Fault saying which) or "" for any other error.
type Failure struct {
	Error    string    `json:"error"`
	Kind     string    `json:"kind"`
	Commit   string    `json:"commit,omitempty"`
	Lines    []string  `json:"lines,omitempty"`
	Dropped  []Dropped `json:"dropped,omitempty"`
	Fault    Fault     `json:"fault,omitempty"`
	Msg      string    `json:"msg,omitempty"`
	Evidence []string  `json:"evidence,omitempty"`
}

// FailureOf describes err for the JSON answer of a failed build.
func FailureOf(err error) Failure {
	f := Failure{Error: err.Error()}
	var be *BuildError
	var ce *ConfigError
	var se *SetupError
	switch {
	case errors.As(err, &be):
		f.Kind, f.Commit, f.Lines = "build", be.Commit, be.Lines
	case errors.As(err, &ce):
		f.Kind, f.Commit, f.Dropped = "config", ce.Commit, ce.Dropped
	case errors.As(err, &se):
		f.Kind, f.Fault, f.Msg, f.Evidence = "setup", se.Fault, se.Msg, se.Evidence
	}
	return f
}

// Err is the error the failure describes, typed as it was where it
// happened; where names the machine for an untyped one.
func (f Failure) Err(where string) error {
	switch f.Kind {
	case "build":
		return &BuildError{Commit: f.Commit, Lines: f.Lines}
	case "config":
		return &ConfigError{Commit: f.Commit, Dropped: f.Dropped}
	case "setup":
		return &SetupError{Fault: f.Fault, Msg: where + ": " + f.Msg, Evidence: f.Evidence}
	}
	return fmt.Errorf("%s: %s", where, strings.TrimSpace(f.Error))
}
