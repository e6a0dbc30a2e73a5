package kbuild

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// remoteCompiles counts the compiles a distccd log shows it received.
func remoteCompiles(t *testing.T, log string) int {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	// Logged when the server takes the job, before the client has its
	// object: a build that finished has all its lines there.
	return bytes.Count(b, []byte("] compile from "))
}

func TestDistccCompilesTheKernelOnTheFarmAndTheKernelIsTheSame(t *testing.T) {
	distccd := needProgram(t, "distccd", "distcc", "KBISECT_REQUIRE_DISTCC")
	needProgram(t, "distcc", "distcc", "KBISECT_REQUIRE_DISTCC")
	port, log := freePort(t), filepath.Join(t.TempDir(), "distccd.log")
	startDaemon(t, port, log, "", distccd, "--daemon", "--no-detach", "--listen", "127.0.0.1", "--port", port,
		"--allow", "127.0.0.1", "--jobs", "2", "--log-stderr", "--log-level=info")
	// The farm is that server alone, and a compile it cannot take fails
	// rather than running here: a build that works was compiled there.
	t.Setenv("DISTCC_HOSTS", "127.0.0.1:"+port+"/2")
	t.Setenv("DISTCC_FALLBACK", "0")
	t.Setenv("DISTCC_DIR", t.TempDir())
	t.Setenv("CCACHE_DIR", filepath.Join(t.TempDir(), "ccache"))
	tree, commits := fakeTree(t)
	ctx := context.Background()

	plain := buildOptions(t, tree)
	want, err := Build(ctx, plain, 0, commits[0])
	if err != nil {
		t.Fatal(err)
	}
	if n := remoteCompiles(t, log); n != 0 {
		t.Fatalf("a build without the wrapper sent %d compiles to the farm", n)
	}

	farm := buildOptions(t, tree)
	farm.CompilerWrapper = []string{"distcc"}
	var buildLog bytes.Buffer
	farm.Log = &buildLog
	got, err := Build(ctx, farm, 0, commits[0])
	if err != nil {
		t.Fatalf("%v\n%s", err, buildLog.String())
	}
	compiles := len(compiled(t, farm, 0))
	n := remoteCompiles(t, log)
	if compiles != 3 || n != compiles {
		t.Errorf("the farm compiled %d of the build's %d compiles, want all 3", n, compiles)
	}
	t.Logf("distccd on 127.0.0.1:%s compiled %d of the build's %d compiles", port, n, compiles)
	if !strings.Contains(buildLog.String(), "kbisect: compile farm: distcc runs every compile (CC=distcc gcc)\n") {
		t.Errorf("the build log does not say how the farm was used:\n%s", buildLog.String())
	}
	// The farm compiles the same objects: the same kernel, under the same
	// identity (a lab that adds a farm does not rebuild its cache).
	if got.Key != want.Key || !reflect.DeepEqual(got.Make, want.Make) {
		t.Errorf("the wrapper changed the kernel's identity: %s %q, without it %s %q", got.Key, got.Make, want.Key, want.Make)
	}
	if d := kernelDiff(t, got, want); d != "" || got.Signature != want.Signature {
		t.Errorf("the farm's kernel differs from the one built here: %s", d)
	}

	// With ccache, ccache comes first and sends its misses to the farm
	// (CCACHE_PREFIX); a second controller's build of the same kernel
	// with the same ccache sends none.
	if _, err := exec.LookPath("ccache"); err != nil {
		t.Skip("ccache is not installed (Debian: apt-get install ccache): the farm under ccache is not tested")
	}
	for i, wantRemote := range []int{2 * compiles, 2 * compiles} {
		o := buildOptions(t, tree)
		o.CCache, o.CompilerWrapper = true, []string{"distcc"}
		a, err := Build(ctx, o, 0, commits[0])
		if err != nil {
			t.Fatal(err)
		}
		if n := remoteCompiles(t, log); n != wantRemote {
			t.Errorf("ccache build %d: the farm has compiled %d in all, want %d", i+1, n, wantRemote)
		}
		if d := kernelDiff(t, a, want); d != "" {
			t.Errorf("ccache build %d: the kernel differs from the one built without the farm: %s", i+1, d)
		}
	}
}

func TestCCacheRemoteStorageServesASecondController(t *testing.T) {
	redis := needProgram(t, "redis-server", "redis-server", "KBISECT_REQUIRE_REDIS")
	ccache := needProgram(t, "ccache", "ccache", "KBISECT_REQUIRE_REDIS")
	// The password reaches redis on stdin and ccache in make's
	// environment: it must show nowhere else.
	// A "$" in it is the password's: ccache would expand "$of" in the URL.
	const password = "s3cret$of-the-lab"
	port, log := freePort(t), filepath.Join(t.TempDir(), "redis.log")
	startDaemon(t, port, log, "port "+port+"\nbind 127.0.0.1\nsave \"\"\nappendonly no\nrequirepass "+password+"\n", redis, "-")
	tree, commits := fakeTree(t)
	ctx := context.Background()
	var stats []map[string]int
	for i, controller := range []string{"first", "second"} {
		// Each controller has its own ccache and its own kernel cache.
		dir := filepath.Join(t.TempDir(), controller)
		t.Setenv("CCACHE_DIR", filepath.Join(dir, "ccache"))
		o := buildOptions(t, tree)
		o.CCache, o.CCacheRemote = true, "redis://"+password+"@127.0.0.1:"+port
		var buildLog bytes.Buffer
		o.Log = &buildLog
		a, err := Build(ctx, o, 0, commits[0])
		if err != nil {
			t.Fatalf("%s controller: %v\n%s", controller, err, buildLog.String())
		}
		if a.Cached || len(compiled(t, o, 0)) != 3 {
			t.Fatalf("%s controller: the kernel was not compiled (cached %v)", controller, a.Cached)
		}
		if strings.Contains(buildLog.String(), password) || !strings.Contains(buildLog.String(), "kbisect: ccache: with the remote storage of build.ccache_remote\n") {
			t.Errorf("%s controller: the build log shows the remote storage's password, or does not say it is used:\n%s", controller, buildLog.String())
		}
		stats = append(stats, ccacheStats(t, ccache))
		if i == 0 {
			if n := redisCommand(t, port, password, "DBSIZE"); n < 3 {
				t.Errorf("redis holds %d keys after the first controller's 3 compiles", n)
			}
		}
	}
	if s := stats[0]; s["remote_storage_write"] < 3 || s["remote_storage_hit"] != 0 {
		t.Errorf("first controller: %d remote writes, %d remote hits; want the 3 compiles written, none hit", s["remote_storage_write"], s["remote_storage_hit"])
	}
	if s := stats[1]; s["remote_storage_hit"] != 3 || s["cache_miss"] != 0 {
		t.Errorf("second controller: %d remote hits, %d misses; want the 3 compiles from redis", s["remote_storage_hit"], s["cache_miss"])
	}
	t.Logf("ccache stats: first %v; second %v", pick(stats[0]), pick(stats[1]))

	// A wrong password: the remote storage refuses, the build goes on
	// (ccache counts the errors) and nothing shows the password.
	t.Setenv("CCACHE_DIR", filepath.Join(t.TempDir(), "ccache"))
	o := buildOptions(t, tree)
	const wrong = "not-the-lab-s3cret"
	o.CCache, o.CCacheRemote = true, "redis://"+wrong+"@127.0.0.1:"+port
	var buildLog bytes.Buffer
	o.Log = &buildLog
	if _, err := Build(ctx, o, 0, commits[0]); err != nil {
		t.Fatalf("a refused remote storage failed the build: %v\n%s", err, buildLog.String())
	}
	if s := ccacheStats(t, ccache); s["remote_storage_error"] == 0 || s["remote_storage_hit"] != 0 || s["cache_miss"] != 3 {
		t.Errorf("with a wrong password: %d remote errors, %d hits, %d misses; want errors and the 3 compiled here", s["remote_storage_error"], s["remote_storage_hit"], s["cache_miss"])
	}
	if strings.Contains(buildLog.String(), wrong) {
		t.Errorf("the build log shows the remote storage's password")
	}
}

// kernelDiff names the files in which two artifacts differ: the bytes of
// each, but the modules' tarball by its entries (it keeps the modules'
// modification times).
func kernelDiff(t *testing.T, a, b *Artifact) string {
	t.Helper()
	var diff []string
	for name, sum := range a.Files {
		if name == "modules.tar" {
			if tarEntries(t, filepath.Join(a.Dir, name)) != tarEntries(t, filepath.Join(b.Dir, name)) {
				diff = append(diff, name)
			}
		} else if sum != b.Files[name] {
			diff = append(diff, name)
		}
	}
	if len(a.Files) != len(b.Files) {
		diff = append(diff, "the list of files")
	}
	return strings.Join(diff, ", ")
}

// ccacheStats reads ccache --print-stats of the CCACHE_DIR in force.
func ccacheStats(t *testing.T, ccache string) map[string]int {
	t.Helper()
	out, err := exec.Command(ccache, "--print-stats").Output()
	if err != nil {
		t.Fatalf("ccache --print-stats: %v", err)
	}
	stats := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		name, value, ok := strings.Cut(line, "\t")
		if n, err := strconv.Atoi(value); ok && err == nil {
			stats[name] = n
		}
	}
	return stats
}

func pick(s map[string]int) map[string]int {
	out := map[string]int{}
	for _, k := range []string{"cache_miss", "remote_storage_hit", "remote_storage_miss", "remote_storage_write", "local_storage_hit"} {
		out[k] = s[k]
	}
	return out
}

// RemoteStorage keeps the secrets of build.ccache_remote in variables of
// their own, which ccache expands; a URL that already names a variable
// (a build server's job) is passed on as it is.
func TestRemoteStorageKeepsTheURLsSecretsInVariables(t *testing.T) {
	value, env := RemoteStorage("redis://pa$word@127.0.0.1:6379 http://${LAB_CACHE} http://cache.lab/ccache|layout=bazel")
	if want := "redis://${KBISECT_CCACHE_REMOTE_0} http://${LAB_CACHE} http://${KBISECT_CCACHE_REMOTE_2}"; value != want {
		t.Errorf("value %q, want %q", value, want)
	}
	if want := []string{"KBISECT_CCACHE_REMOTE_0=pa$word@127.0.0.1:6379", "KBISECT_CCACHE_REMOTE_2=cache.lab/ccache|layout=bazel"}; !slices.Equal(env, want) {
		t.Errorf("env %q, want %q", env, want)
	}
}
