package kbuild

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// publish makes a collected artifact visible under its key: meta.json,
// the last of its files, is written into the artifact's temporary
// directory, and the directory is renamed to the key, the one step that
// shows it, whole or not at all. Controllers that share the cache
// directory (on NFS, say) may publish the same key at once; rename(2)
// does not replace a directory that holds files, so the later one finds
// the earlier one's complete artifact there, keeps it and drops its own
// copy: a race lost, never two builds' files mixed. A damaged or
// half-removed artifact in the way is removed and the rename tried again.
func (o Options) publish(tmp string, a *Artifact) (*Artifact, error) {
	dir := a.Dir
	fail := func(err error) (*Artifact, error) {
		os.RemoveAll(tmp)
		return nil, err
	}
	if err := writeMeta(tmp, a); err != nil {
		return fail(err)
	}
	if err := syncPath(tmp); err != nil {
		return fail(err)
	}
	for attempt := 1; ; attempt++ {
		err := os.Rename(tmp, dir)
		if err == nil {
			if err := syncPath(filepath.Dir(dir)); err != nil {
				return nil, err
			}
			return a, nil
		}
		if !errors.Is(err, syscall.EEXIST) && !errors.Is(err, syscall.ENOTEMPTY) {
			return fail(err)
		}
		var de *DamagedError
		switch cerr := Check(dir); {
		case cerr == nil:
			won, lerr := loadArtifact(dir)
			if lerr != nil {
				return fail(lerr)
			}
			os.RemoveAll(tmp)
			o.logf("cache: another builder published %s first: its artifact is used, this build's copy dropped", dir)
			won.Took, won.Seconds = a.Took, a.Seconds
			return won, nil
		case !errors.As(cerr, &de):
			return fail(cerr)
		case attempt == 3:
			return fail(fmt.Errorf("cache: cannot publish %s: %v (%v)", dir, err, cerr))
		}
		// Damaged, or being removed by an eviction: it goes, ours takes
		// its place.
		if err := discard(dir); err != nil && !os.IsNotExist(err) {
			return fail(err)
		}
	}
}

// checkWrapper says what to install when the compile farm's client is not
// on PATH: make would fail every commit with "command not found", which is
// the build machine's fault, not the kernel's.
func (o Options) checkWrapper() error { return CheckCompilerWrapper(o.CompilerWrapper) }

// CheckCompilerWrapper returns a *SetupError saying what to install when
// the compile farm's client (build.compiler_wrapper) is not on PATH.
func CheckCompilerWrapper(wrapper []string) error {
	if len(wrapper) == 0 {
		return nil
	}
	prog := wrapper[0]
	if _, err := exec.LookPath(prog); err != nil {
		return &SetupError{Fault: FaultTool, Msg: fmt.Sprintf("build.compiler_wrapper: %s is not installed here (%s)", prog, installHint(prog))}
	}
	return nil
}

// installHint names the Debian package of a compile farm's client.
func installHint(prog string) string {
	switch filepath.Base(prog) {
	case "distcc", "pump":
		return "Debian: apt-get install distcc"
	case "icecc":
		return "Debian: apt-get install icecc"
	}
	return "install it"
}

// farmNote says how the compile farm's client runs the compiles, for the
// build log.
func (m *maker) farmNote() string {
	w := strings.Join(m.wrapper, " ")
	if m.ccache {
		return "ccache runs " + w + " for its misses (CCACHE_PREFIX)"
	}
	return w + " runs every compile (CC=" + w + " " + m.ccCommand() + ")"
}
