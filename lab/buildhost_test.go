package lab

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kbisect/configs"
	"kbisect/internal/simlab"
	"kbisect/internal/sshtest"
	"kbisect/kbuild"
	"kbisect/remote"
)

// serverTree is simlab.FakeTree: the simulated lab's kernel build system
// and three C files, one commit per entry of changes.
func serverTree(t *testing.T, changes ...map[string]string) (string, []string) {
	t.Helper()
	return simlab.FakeTree(t, changes...)
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@kbisect", "-c", "user.name=t"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// testKbisect builds kbisect for the build server to run.
func testKbisect(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("build server test skipped: the go tool is not on PATH to build the kbisect the server runs")
	}
	bin := filepath.Join(t.TempDir(), "kbisect")
	if out, err := exec.Command(goTool, "build", "-o", bin, "kbisect/cmd/kbisect").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// buildServerFor starts a real sshd as the build server, its sessions'
// $HOME a directory of the test's, and returns it as a BuildServer whose
// clone (build.remote_tree) holds the local tree up to its first commit.
func buildServerFor(t *testing.T, local, exe string) (*BuildServer, string) {
	t.Helper()
	home := t.TempDir()
	return buildServerOn(t, sshtest.Start(t, "SetEnv HOME="+home), home, local, exe), home
}

// buildServerOn is buildServerFor with the server given, its sessions'
// $HOME home.
func buildServerOn(t *testing.T, srv *sshtest.Server, home, local, exe string) *BuildServer {
	t.Helper()
	clone := filepath.Join(home, "src", "linux")
	first := strings.Fields(gitIn(t, local, "rev-list", "--max-parents=0", "HEAD"))[0]
	gitIn(t, local, "clone", "-q", "--no-local", local, clone)
	gitIn(t, clone, "checkout", "-q", "--detach", first)
	for _, ref := range strings.Fields(gitIn(t, clone, "for-each-ref", "--format=%(refname)", "refs/heads", "refs/remotes")) {
		gitIn(t, clone, "update-ref", "-d", ref)
	}
	gitIn(t, clone, "update-ref", "refs/heads/base", first)
	gitIn(t, clone, "reflog", "expire", "--expire=now", "--all")
	gitIn(t, clone, "gc", "-q", "--prune=now")
	s := &BuildServer{SSH: remote.Options{Address: "127.0.0.1", Port: srv.Port, User: srv.User, Identity: srv.Identity,
		KnownHosts: srv.KnownHosts, ConnectTimeout: 10 * time.Second}, Tree: "~/src/linux", Exe: exe}
	s.SetSlots(2)
	return s
}

func TestABuildServerBuildsWhatALocalBuildWouldAndTheCacheKeepsIt(t *testing.T) {
	exe := testKbisect(t)
	local, commits := serverTree(t,
		map[string]string{"kernel/eventpoll.c": "int ep_poll_callback(void) { return 2; }\n"},
		map[string]string{"kernel/helper.c": "int helper(void) { return undefined_symbol; }\n"},
		map[string]string{"kernel/helper.c": "#error flex: not found\n"})
	server, home := buildServerFor(t, local, exe)
	frag := filepath.Join(t.TempDir(), "rt.config")
	if err := os.WriteFile(frag, []byte("CONFIG_EXPERT=y\nCONFIG_PREEMPT_RT=y\nCONFIG_NO_HZ_FULL=y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	base := kbuild.Options{Tree: local, Base: "tinyconfig", Fragments: []string{frag}, Jobs: 2}

	here := base
	here.CacheDir = t.TempDir()
	start := time.Now()
	want, err := kbuild.Build(ctx, here, 0, commits[1])
	if err != nil {
		t.Fatal(err)
	}
	localTook := time.Since(start)

	var log bytes.Buffer
	there := base
	there.CacheDir, there.Log, there.Server = t.TempDir(), &log, server
	start = time.Now()
	got, err := kbuild.Build(ctx, there, 0, commits[1])
	if err != nil {
		t.Fatalf("%v\nlog:\n%s", err, log.String())
	}
	t.Logf("local build %.2fs, on the build server %.2fs", localTook.Seconds(), time.Since(start).Seconds())
	// modules.tar keeps the install's mtimes, so two builds here differ
	// in it too: its size is compared, every other file byte for byte.
	same := func(files map[string]kbuild.FileSum) map[string]kbuild.FileSum {
		c := maps.Clone(files)
		c["modules.tar"] = kbuild.FileSum{Size: files["modules.tar"].Size}
		return c
	}
	if got.Key != want.Key || got.Signature != want.Signature || got.Release != want.Release || len(got.Files) != 5 || !reflect.DeepEqual(same(got.Files), same(want.Files)) {
		t.Errorf("the server's artifact %s %s %v\ndiffers from a local build's %s %s %v", got.Key, got.Signature, got.Files, want.Key, want.Signature, want.Files)
	}
	if got.Dir != filepath.Join(there.CacheDir, "artifacts", got.Key) || got.Cached {
		t.Errorf("published in %s (cached %v), want the local cache", got.Dir, got.Cached)
	}
	if err := kbuild.Check(got.Dir); err != nil {
		t.Error(err)
	}
	// The commit the server's clone lacked went as a pack.
	m := regexp.MustCompile(`sent to the build server's tree as a pack of (\d+) bytes`).FindStringSubmatch(log.String())
	if m == nil {
		t.Errorf("the log does not say the commit was sent:\n%s", log.String())
	} else {
		t.Logf("the pack that carried %s: %s bytes", commits[1][:12], m[1])
	}
	clone := filepath.Join(home, "src", "linux")
	if ref := gitIn(t, clone, "rev-parse", "refs/kbisect/"+commits[1]); ref != commits[1] {
		t.Errorf("the server's clone keeps %s under refs/kbisect, want %s", ref, commits[1])
	}
	// make's output on the server is in the build log here.
	if !strings.Contains(log.String(), "CC      kernel/eventpoll.o") {
		t.Errorf("the build log lacks the server's make output:\n%s", log.String())
	}
	shipped, _ := filepath.Glob(filepath.Join(home, ".cache", "kbisect", "bin", "kbisect-*"))
	if len(shipped) != 1 {
		t.Errorf("kbisect shipped to the server as %v, want once", shipped)
	}

	// The second build is the local cache's: the server is not asked
	// (here, it could not be reached).
	there.Server = &BuildServer{SSH: remote.Options{Address: "127.0.0.1", Port: sshtest.FreePort(t), ConnectTimeout: time.Second}, Tree: "x", Exe: exe}
	again, err := kbuild.Build(ctx, there, 0, commits[1])
	if err != nil || !again.Cached || again.Key != want.Key {
		t.Fatalf("second build: %+v %v, want a cache hit", again, err)
	}

	// A commit that does not build there is the commit's failure, with
	// the compiler's words.
	there.Server = server
	log.Reset()
	_, err = kbuild.Build(ctx, there, 1, commits[2])
	var be *kbuild.BuildError
	if !errors.As(err, &be) || be.Commit != commits[2] || !strings.Contains(strings.Join(be.Lines, "\n"), "undefined_symbol") {
		t.Fatalf("got %T %v, want the commit's BuildError naming undefined_symbol\nlog:\n%s", err, err, log.String())
	}
	// A build the server's machine failed is the lab's fault, typed as
	// there (here: what a missing flex says).
	_, err = kbuild.Build(ctx, there, 0, commits[3])
	var se *kbuild.SetupError
	if !errors.As(err, &se) || se.Fault != kbuild.FaultTool || !strings.HasPrefix(se.Msg, "build server "+server.SSH.User+"@127.0.0.1:") {
		t.Fatalf("got %T %v, want the server's SetupError of a missing tool", err, err)
	}
}

func TestABuildServerWithAnUnknownHostKeyIsRefused(t *testing.T) {
	local, commits := serverTree(t)
	server, home := buildServerFor(t, local, "/nonexistent/kbisect")
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	server.SSH.KnownHosts = empty
	o := kbuild.Options{Tree: local, Base: "tinyconfig", CacheDir: t.TempDir(), Server: server}
	_, err := kbuild.Build(context.Background(), o, 0, commits[0])
	var hk *remote.HostKeyError
	if !errors.As(err, &hk) || hk.Changed {
		t.Fatalf("got %T %v, want the unknown host key refused", err, err)
	}
	if _, err := os.Stat(filepath.Join(home, ".cache")); !os.IsNotExist(err) {
		t.Errorf("something reached the server that refused: %v", err)
	}

	// A server without its clone is the lab's fault, with the fix.
	server.SSH.KnownHosts = filepath.Join(filepath.Dir(server.SSH.Identity), "known_hosts")
	server.Tree = "~/src/nothing"
	_, err = kbuild.Build(context.Background(), o, 0, commits[0])
	var se *kbuild.SetupError
	if !errors.As(err, &se) || !strings.Contains(se.Msg, "build.remote_tree ~/src/nothing is not a git clone there: make one (git clone URL ~/src/nothing)") {
		t.Fatalf("got %T %v, want a SetupError saying to clone the tree", err, err)
	}
}

// TestThePreflightNamesWhatTheBuildServerLacks: before anything is built,
// the preflight dials the build server with its key verified and names
// its missing clone and compiler, each with its fix; an unknown key is a
// problem under build.host's keys.
func TestThePreflightNamesWhatTheBuildServerLacks(t *testing.T) {
	job, err := configs.Load("../configs/qemu-local.yaml", configs.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	local, _ := serverTree(t)
	server, home := buildServerFor(t, local, "")
	job.Build.Tree, job.Boot.QEMU.Image = configs.Path(local), configs.Path(t.TempDir())
	job.Build.CacheDir = configs.Path(t.TempDir())
	job.Build.CCache = false
	job.Build.Host = configs.Host{Address: "127.0.0.1", Port: server.SSH.Port, User: server.SSH.User,
		Identity: configs.Path(server.SSH.Identity), KnownHosts: configs.Path(server.SSH.KnownHosts), ConnectTimeout: configs.Duration(10 * time.Second)}
	job.Build.RemoteTree, job.Build.Slots = "~/src/linux", 1
	problems := func() []string {
		rd, err := Preflight(context.Background(), job, PreflightOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range rd.Problems {
			if strings.Contains(p.What, "build server") {
				got = append(got, p.String())
			}
		}
		return got
	}
	if got := problems(); len(got) != 0 {
		t.Errorf("a ready build server has problems: %q", got)
	}

	job.Build.RemoteTree = "~/src/nothing"
	job.Build.MakeVars = map[string]string{"CC": "no-such-cc"}
	name := server.SSH.User + "@127.0.0.1:" + strconv.Itoa(server.SSH.Port)
	want := []string{
		"build server " + name + ": no-such-cc is not installed there; fix: install it on the build server (its package)",
		"build server " + name + ": build.remote_tree ~/src/nothing is not a git clone there; fix: clone the kernel there: git clone URL ~/src/nothing",
	}
	if got := problems(); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}

	empty := filepath.Join(home, "known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	job.Build.Host.KnownHosts = configs.Path(empty)
	got := problems()
	if len(got) != 1 || !strings.HasPrefix(got[0], "build server: ") || !strings.Contains(got[0], "fix: verify the host key, then put the right line in "+empty) {
		t.Errorf("an unknown host key: %q", got)
	}
}

// TestTheRemoteStoragesPasswordReachesTheBuildServerOnStdinAlone: the
// expanded build.ccache_remote is in the environment of the server's
// kbisect (its build says it uses the remote storage), sent on the SSH
// session's standard input, never on a command line nor in the log.
func TestTheRemoteStoragesPasswordReachesTheBuildServerOnStdinAlone(t *testing.T) {
	if _, err := exec.LookPath("ccache"); err != nil {
		t.Skip("ccache is not installed (apt-get install ccache): the remote storage is ccache's")
	}
	exe := testKbisect(t)
	local, commits := serverTree(t)
	home := t.TempDir()
	srv := sshtest.StartRecording(t, "SetEnv HOME="+home)
	server := buildServerOn(t, srv, home, local, exe)
	const secret = "s3cr3t-pw-4711"
	var log bytes.Buffer
	o := kbuild.Options{Tree: local, Base: "tinyconfig", Jobs: 2, CacheDir: t.TempDir(), Log: &log, Server: server,
		CCache: true, CCacheRemote: "redis://kbisect:" + secret + "@127.0.0.1:1"}
	if _, err := kbuild.Build(context.Background(), o, 0, commits[0]); err != nil {
		t.Fatalf("%v\nlog:\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "ccache: with the remote storage of build.ccache_remote") {
		t.Errorf("the server's build did not get the remote storage:\n%s", log.String())
	}
	if strings.Contains(log.String(), secret) {
		t.Errorf("the build log shows the password")
	}
	rec, err := os.ReadFile(srv.Received)
	if err != nil {
		t.Fatal(err)
	}
	var commands, stdin int
	for _, line := range strings.Split(string(rec), "\n") {
		switch {
		case strings.HasPrefix(line, "== command:"):
			commands++
			if strings.Contains(line, secret) {
				t.Errorf("a command line holds the password: %s", line)
			}
		case strings.Contains(line, "export KBISECT_CCACHE_REMOTE_0=kbisect:"+secret+"@127.0.0.1:1"):
			stdin++
		}
	}
	if commands == 0 || stdin != 1 || !strings.Contains(string(rec), secret) {
		t.Errorf("%d sessions, %d exports of the remote storage on stdin, want it once", commands, stdin)
	}
}

func TestBuildOptionsBuildOnBuildHostWithItsSlots(t *testing.T) {
	job := &configs.Job{Build: configs.Build{Tree: "/src/linux", Slots: 3, RemoteTree: "~/linux", HostKbisect: "/opt/kbisect",
		Host: configs.Host{Address: "build1", Port: 2200, User: "builder", KnownHosts: "/kh", ConnectTimeout: configs.Duration(time.Second)}}}
	s, ok := BuildOptions(job, nil).Server.(*BuildServer)
	if !ok {
		t.Fatal("build.host set, no build server in the options")
	}
	want := remote.Options{Address: "build1", Port: 2200, User: "builder", KnownHosts: "/kh", ConnectTimeout: time.Second}
	if s.SSH != want || s.Tree != "~/linux" || s.Kbisect != "/opt/kbisect" || s.Slots() != 3 || len(s.free) != 3 {
		t.Errorf("server %+v, %d slots", s, s.Slots())
	}
	job.Build.Host = configs.Host{}
	if o := BuildOptions(job, nil); o.Server != nil {
		t.Errorf("no build.host, yet a build server: %+v", o.Server)
	}
}

// TestAStoppedBuildOnTheServerEndsThereAndFreesItsSlot: sshd does not pass
// a signal on, so a build the controller stops (a build ahead making way)
// is stopped by its pid: nothing of it runs on, and its slot builds the
// next kernel at once.
func TestAStoppedBuildOnTheServerEndsThereAndFreesItsSlot(t *testing.T) {
	exe := testKbisect(t)
	local, commits := serverTree(t)
	home := t.TempDir()
	srv := sshtest.Start(t, "SetEnv HOME="+home)
	server := buildServerOn(t, srv, home, local, exe)
	server.SetSlots(1)
	started := filepath.Join(home, "compiling")
	slowcc := filepath.Join(home, "slowcc")
	script := "#!/bin/sh\n[ \"$1\" = --version ] && exec gcc --version\ntouch " + started + "\nexec sleep 4711.25\n"
	if err := os.WriteFile(slowcc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := kbuild.Options{Tree: local, Base: "tinyconfig", Jobs: 1, CacheDir: t.TempDir(), Server: server, MakeVars: map[string]string{"CC": slowcc}}
	// slow starts the slow build, waits for its compiler, then stops it
	// with stop and returns what the build returned.
	slow := func(stop func()) error {
		_ = os.Remove(started)
		done := make(chan error, 1)
		go func() {
			_, err := kbuild.Build(ctx, o, 0, commits[0])
			done <- err
		}()
		for {
			if _, err := os.Stat(started); err == nil {
				break
			}
			select {
			case err := <-done:
				t.Fatalf("the slow build ended before it compiled: %v", err)
			case <-time.After(100 * time.Millisecond):
			}
		}
		stop()
		err := <-done
		if out, perr := exec.Command("pgrep", "-f", "sleep 4711.25").CombinedOutput(); perr == nil {
			t.Errorf("the stopped build's compiler still runs on the server: %s", out)
		}
		return err
	}
	// A connection that drops: the build there is stopped from another.
	var ie *remote.InfraError
	if err := slow(srv.KillConnections); !errors.As(err, &ie) {
		t.Fatalf("a build whose connection dropped returned %T %v", err, err)
	}
	if err := slow(cancel); !errors.Is(err, context.Canceled) {
		t.Fatalf("a stopped build returned %v", err)
	}
	o.MakeVars = nil
	if _, err := kbuild.Build(context.Background(), o, 0, commits[0]); err != nil {
		t.Fatalf("the next build in the freed slot: %v", err)
	}
}

// TestTwoControllersShareABuildServersLogin: a build server's slot that
// another controller's build holds is passed over: the build takes the
// next free slot there instead of failing with "slot in use".
func TestTwoControllersShareABuildServersLogin(t *testing.T) {
	exe := testKbisect(t)
	local, commits := serverTree(t,
		map[string]string{"kernel/eventpoll.c": "int ep_poll_callback(void) { return 2; }\n"})
	server, home := buildServerFor(t, local, exe)
	server.SetSlots(1) // this controller's slot 0 there
	var log bytes.Buffer
	o := kbuild.Options{Tree: local, Base: "tinyconfig", Jobs: 1, CacheDir: t.TempDir(), Server: server, Log: &log}
	ctx := context.Background()
	if _, err := kbuild.Build(ctx, o, 0, commits[0]); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	locks, _ := filepath.Glob(filepath.Join(home, ".cache", "kbisect", "build-cache", "slots", "*", "slot-0", "lock"))
	if len(locks) != 1 {
		t.Fatalf("the server's slot 0: %v", locks)
	}
	// The other controller's build holds slot 0 there.
	other, err := os.OpenFile(locks[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	log.Reset()
	a, err := kbuild.Build(ctx, o, 0, commits[1])
	if err != nil {
		t.Fatalf("with slot 0 held by another controller: %v\n%s", err, log.String())
	}
	if a.Cached || !strings.Contains(log.String(), "build slot 0 is another kbisect's: building in slot 1") {
		t.Errorf("built %+v; the log does not say it took slot 1:\n%s", a, log.String())
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(locks[0])), "slot-1", "out")); err != nil {
		t.Errorf("the server's slot 1: %v", err)
	}
}
