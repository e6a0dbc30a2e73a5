package lab

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"

	"kbisect/configs"
)

func TestAPreflightNamesAMissingCompilerWrapperAndWhatToInstall(t *testing.T) {
	job, err := configs.Load("../configs/qemu-local.yaml", configs.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tree := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", tree).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	job.Build.Tree, job.Build.CacheDir = configs.Path(tree), configs.Path(t.TempDir())
	job.Build.CompilerWrapper = "/nonexistent/bin/icecc"
	rd, err := Preflight(context.Background(), job, PreflightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, p := range rd.Problems {
		found = found || (p.What == "build.compiler_wrapper: /nonexistent/bin/icecc is not installed here (Debian: apt-get install icecc)" &&
			p.Fix == "install it where kbisect runs, or give its full path in build.compiler_wrapper")
	}
	if !found {
		t.Errorf("problems %+v", rd.Problems)
	}
}

func TestBuildOptionsExpandTheRemoteStorageForMakeAlone(t *testing.T) {
	job := &configs.Job{Build: configs.Build{CCache: true, CompilerWrapper: "distcc",
		CCacheRemote: "redis://${LAB_TEST_REDIS_PW}@cache:6379"}}
	t.Setenv("LAB_TEST_REDIS_PW", "hunter2")
	var log bytes.Buffer
	o := BuildOptions(job, &log)
	if o.CCacheRemote != "redis://hunter2@cache:6379" || strings.Join(o.CompilerWrapper, " ") != "distcc" || log.Len() != 0 {
		t.Errorf("options: remote %q, wrapper %q; log %q", o.CCacheRemote, o.CompilerWrapper, log.String())
	}
	job.Build.CCacheRemote = "redis://${LAB_TEST_REDIS_UNSET}@cache:6379"
	o = BuildOptions(job, &log)
	if o.CCacheRemote != "" || log.String() != "kbisect: build.ccache_remote: environment variable LAB_TEST_REDIS_UNSET is not set: ccache runs without its remote storage\n" {
		t.Errorf("without the variable: remote %q, log %q", o.CCacheRemote, log.String())
	}
}

func TestBuildOptionsGiveTheHTTPCacheItsPasswordAlone(t *testing.T) {
	job := &configs.Job{Build: configs.Build{CacheURL: "https://lab:${LAB_TEST_CACHE_PW}@kernels.lab/cache"}}
	t.Setenv("LAB_TEST_CACHE_PW", "hunter2/x")
	var log bytes.Buffer
	o := BuildOptions(job, &log)
	if o.CacheURL == nil || log.Len() != 0 {
		t.Fatalf("cache URL %v, log %q", o.CacheURL, log.String())
	}
	if pw, _ := o.CacheURL.User.Password(); o.CacheURL.Host != "kernels.lab" || o.CacheURL.Path != "/cache" || pw != "hunter2/x" {
		t.Errorf("cache URL: host %q, path %q, password %q", o.CacheURL.Host, o.CacheURL.Path, pw)
	}
	job.Build.CacheURL = "https://lab:${LAB_TEST_CACHE_UNSET}@kernels.lab/cache"
	o = BuildOptions(job, &log)
	if o.CacheURL != nil || log.String() != "kbisect: build.cache_url: environment variable LAB_TEST_CACHE_UNSET is not set: kernels are built without the HTTP cache\n" {
		t.Errorf("without the variable: %v, log %q", o.CacheURL, log.String())
	}
}
