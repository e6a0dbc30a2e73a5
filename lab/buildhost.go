package lab

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"kbisect/configs"
	"kbisect/internal/shell"
	"kbisect/kbuild"
	"kbisect/remote"
)

// BuildServer builds kernels on a build server over SSH (build.host):
// kbisect's own build runs there, in the server's clone of the tree, and
// the artifact comes back here through this controller, checked file by
// file before it is published in the local cache; a lab host gets it
// from the server itself when its job says so and it can (ToLab). The
// server's slots, cache and ccache are its own.
type BuildServer struct {
	// SSH says how the server is reached, its host key verified as the
	// lab host's is.
	SSH remote.Options
	// Tree is the server's clone (build.remote_tree): absolute, or under
	// the login's home directory.
	Tree string
	// Kbisect is a kbisect installed on the server (build.host_kbisect);
	// without it Exe, this controller's own executable, is shipped there
	// once, named by its SHA-256.
	Kbisect string
	Exe     string
	// CacheSize caps the server's cache as build.cache_size caps ours.
	CacheSize int64
	free      chan struct{} // a token for each slot not in use
	mu        sync.Mutex
	busy      []bool // slot i is in use
}

var _ kbuild.Server = (*BuildServer)(nil)

// NewBuildServer returns the build server of the job's build.host, with
// build.slots slots; exe is the kbisect executable to ship there.
func NewBuildServer(job *configs.Job, exe string) *BuildServer {
	b := job.Build
	h := b.Host
	s := &BuildServer{
		SSH: remote.Options{Address: h.Address, Port: h.Port, User: h.User, Identity: string(h.Identity),
			KnownHosts: string(h.KnownHosts), AcceptNewHostKey: h.AcceptNewHostKey, Jump: h.Jump,
			ConnectTimeout: h.ConnectTimeout.D(), Keepalive: h.Keepalive.D()},
		Tree: b.RemoteTree, Kbisect: b.HostKbisect, Exe: exe, CacheSize: int64(b.CacheSize),
	}
	s.SetSlots(b.Slots)
	return s
}

// SetSlots sets how many builds the server runs at once (at least one).
func (s *BuildServer) SetSlots(n int) {
	n = max(n, 1)
	s.free, s.busy = make(chan struct{}, n), make([]bool, n)
	for range n {
		s.free <- struct{}{}
	}
}

// Slots is how many builds the server runs at once.
func (s *BuildServer) Slots() int { return len(s.busy) }

// take waits for a free slot and takes the lowest-numbered: slots are
// used in order, so the one taken has most likely built a nearby commit
// already (an incremental build, not a cold one).
func (s *BuildServer) take(ctx context.Context) (int, error) {
	select {
	case <-s.free:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.Index(s.busy, false)
	s.busy[i] = true
	return i, nil
}

func (s *BuildServer) give(slot int) {
	s.mu.Lock()
	s.busy[slot] = false
	s.mu.Unlock()
	s.free <- struct{}{}
}

// Build builds commit on the server, in the lowest of its slots free
// (the controller's slot number does not name the server's), and
// unpacks the artifact into dir.
func (s *BuildServer) Build(ctx context.Context, o kbuild.Options, _ int, commit, dir string) error {
	if s.free == nil {
		return errors.New("kbisect: a BuildServer without slots (NewBuildServer or SetSlots makes them)")
	}
	slot, err := s.take(ctx)
	if err != nil {
		return err
	}
	defer s.give(slot)
	h, err := remote.Dial(ctx, s.SSH)
	if err != nil {
		return err
	}
	defer h.Close()
	where := "build server " + h.Name()
	home, tree, err := s.tree(ctx, h)
	if err != nil {
		return err
	}
	bin, err := s.kbisect(ctx, h, home)
	if err != nil {
		return err
	}
	if err := s.sendCommit(ctx, h, o, tree, commit); err != nil {
		return err
	}
	job, cleanup, err := s.sendJob(ctx, h, o, home, tree)
	if err != nil {
		return err
	}
	defer cleanup()
	// The build's pid is kept beside its job: sshd does not pass a
	// signal on to the session's command, so a build this controller
	// stops (a build ahead made way) is stopped by its pid.
	pidFile := path.Dir(job) + "/pid"
	cmd := shell.Cmd{Script: "echo $$ >" + shell.Quote(pidFile) + " && exec " +
		shell.Join(bin, "build", "--job", job, "--rev", commit, "--slot", strconv.Itoa(slot), "--json", "--log", "-")}
	// The remote storage's secret reaches the server's kbisect in its
	// environment, which Stream sends on standard input: never on a
	// command line or in the job file.
	_, cmd.Env = kbuild.RemoteStorage(o.CCacheRemote)
	var out bytes.Buffer
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	err = h.Stream(ctx, cmd, &out, log)
	var ee *shell.ExitError
	switch {
	case ctx.Err() != nil:
		stopBuild(ctx, h, pidFile)
		return ctx.Err()
	case err == nil:
	case errors.As(err, &ee):
		var f kbuild.Failure
		if json.Unmarshal(out.Bytes(), &f) == nil && f.Error != "" {
			return f.Err(where)
		}
		if ee.Code == 126 || ee.Code == 127 {
			return &kbuild.SetupError{Fault: kbuild.FaultTool, Msg: fmt.Sprintf("%s: %s cannot run there: %v (set build.host_kbisect to a kbisect installed there)", where, bin, err)}
		}
		return fmt.Errorf("%s: kbisect build: %w", where, err)
	default:
		var ie *remote.InfraError
		if errors.As(err, &ie) {
			// The connection dropped; the build there runs on, its answer
			// lost, its slot busy: stopped from a new connection.
			if again, derr := remote.Dial(context.WithoutCancel(ctx), s.SSH); derr == nil {
				stopBuild(ctx, again, pidFile)
				// The deferred cleanup runs on the lost connection.
				_, _, _ = again.Run(context.WithoutCancel(ctx), shell.Cmd{Script: "rm -rf " + shell.Quote(path.Dir(job))})
				again.Close()
			}
		}
		return err
	}
	var a kbuild.Artifact
	if err := json.Unmarshal(out.Bytes(), &a); err != nil || a.Dir == "" {
		return fmt.Errorf("%s: kbisect build answered no artifact (%q)", where, strings.TrimSpace(out.String()))
	}
	return fetchArtifact(ctx, h, a.Dir, dir)
}

// stopBuild ends the server's kbisect build of pidFile with SIGTERM (it
// stops make and frees its slot as on Ctrl-C) and waits up to a minute
// for it to be gone, so that the slot is free when it is given again.
func stopBuild(ctx context.Context, h *remote.Host, pidFile string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	script := "p=$(cat " + shell.Quote(pidFile) + " 2>/dev/null) || exit 0\n" +
		"kill -TERM \"$p\" 2>/dev/null || exit 0\n" +
		"i=0; while kill -0 \"$p\" 2>/dev/null && [ $i -lt 500 ]; do sleep 0.1; i=$((i+1)); done\n"
	// Best effort: a connection lost here leaves the build to end by
	// itself, and the slot busy until it does.
	_, _, _ = h.Run(ctx, shell.Cmd{Script: script})
}

// fetchArtifact streams the server's artifact directory as tar into dir:
// regular files alone, none outside dir (kbuild checks their sums).
func fetchArtifact(ctx context.Context, h *remote.Host, from, dir string) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := untarFlat(pr, dir)
		// The rest of the stream is read, also after a refused entry or
		// a full disk here: over SSH, unread output does not end the
		// remote tar, it leaves it blocked on a full channel.
		_, cerr := io.Copy(io.Discard, pr)
		if err == nil {
			err = cerr
		}
		done <- err
	}()
	var stderr bytes.Buffer
	err := h.Stream(ctx, shell.Cmd{Script: "cd " + shell.Quote(from) + " && tar -cf - ."}, pw, &stderr)
	pw.CloseWithError(err)
	if uerr := <-done; uerr != nil {
		err = uerr
	}
	if err != nil {
		return fmt.Errorf("build server %s: fetching the artifact %s: %w", h.Name(), from, err)
	}
	return nil
}

// untarFlat unpacks a tar stream of one flat directory into dir.
func untarFlat(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		switch {
		case hdr.Typeflag == tar.TypeDir && (name == "" || name == "."):
			continue
		case hdr.Typeflag != tar.TypeReg || name == "" || name != filepath.Base(name) || name == "." || name == "..":
			return fmt.Errorf("the artifact holds %q, not a file of an artifact", hdr.Name)
		}
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}
