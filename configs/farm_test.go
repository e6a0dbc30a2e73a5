package configs

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestCCacheRemoteSecretsStayNamesInEveryView(t *testing.T) {
	job, err := Load(filepath.Join("testdata", "valid-full.yaml"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	const written = "redis://${CCACHE_REDIS_PASSWORD}@cache.lab:6379|connect-timeout=500 http://cache.lab:8080/ccache"
	if job.Build.CCacheRemote != written || strings.Join(job.Build.Wrapper(), " ") != "distcc" {
		t.Fatalf("build.ccache_remote %q, wrapper %q", job.Build.CCacheRemote, job.Build.Wrapper())
	}
	settings, err := job.Settings()
	if err != nil {
		t.Fatal(err)
	}
	if got := settings["build.ccache_remote"].Value; got != written {
		t.Errorf("Settings shows %q, want it as written", got)
	}
	shown, err := job.Effective()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(shown), "hunter2") || !strings.Contains(string(shown), "ccache_remote: redis://${CCACHE_REDIS_PASSWORD}@cache.lab:6379|connect-timeout=500 http://cache.lab:8080/ccache # ${CCACHE_REDIS_PASSWORD} from the environment\n") {
		t.Errorf("config show:\n%s", shown)
	}
	url, err := job.Build.CCacheRemote.Expand(testEnv)
	if err != nil || url != "redis://hunter2@cache.lab:6379|connect-timeout=500 http://cache.lab:8080/ccache" {
		t.Errorf("Expand = %q, %v", url, err)
	}
	unset := func(string) (string, bool) { return "", false }
	if _, err := job.Build.CCacheRemote.Expand(unset); err == nil || err.Error() != "environment variable CCACHE_REDIS_PASSWORD is not set" {
		t.Errorf("Expand without the variable: %v", err)
	}
	if err := job.CheckEnv(unset); err == nil || !strings.Contains(err.Error(), "build.ccache_remote: environment variable CCACHE_REDIS_PASSWORD is not set") {
		t.Errorf("CheckEnv without the variable: %v", err)
	}
}

func TestStorageProblems(t *testing.T) {
	for url, want := range map[string]string{
		"redis://127.0.0.1:6379":               "",
		"redis+unix:///run/redis.sock":         "",
		"file:///srv/ccache|layout=subdirs":    "",
		"http://user@cache/ccache":             "",
		"http://user:${PW}@cache/ccache":       "",
		"redis://${PW}@cache":                  "",
		"redis://default:${PW}@cache":          "",
		"redis://hunter2@cache":                "password",
		"redis://default:hunter2@cache":        "password",
		"http://user:x${PW}@cache":             "password",
		"https://cache/ccache":                 "not a ccache remote storage",
		"cache.lab:6379":                       "not a ccache remote storage",
		"redis://cache/0|password=hunter2":     "password",
		"http://cache/c|bearer-token=${TOKEN}": "",
		"http://cache/c|bearer-token=hunter2":  "bearer-token",
	} {
		got := storageProblem(url)
		if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
			t.Errorf("storageProblem(%q) = %q, want %q", url, got, want)
		}
		if strings.Contains(got, "hunter2") {
			t.Errorf("storageProblem(%q) repeats the password", url)
		}
	}
}

// TestCacheURLIsOneHTTPDirectoryWithItsSecretInTheEnvironment: build.cache_url
// takes an http(s) URL, its password a ${NAME} expanded from the
// environment (and said missing by CheckEnv); anything else is refused
// at its line and column with what to write.
func TestCacheURLIsOneHTTPDirectoryWithItsSecretInTheEnvironment(t *testing.T) {
	const boot = "boot: {method: kexec, params: nohz_full=1}\n"
	job, diags := loadMem(t, map[string]string{"job.yaml": okJob + boot + "host: {address: h}\nbuild:\n  tree: /\n  cache_url: https://lab:${CCACHE_REDIS_PASSWORD}@kernels.lab/cache\n"})
	if job == nil {
		t.Fatalf("refused: %v", diags)
	}
	u, err := job.Build.CacheURL.HTTPURL(testEnv)
	if pw, _ := u.User.Password(); err != nil || u.Host != "kernels.lab" || u.Path != "/cache" || u.User.Username() != "lab" || pw != "hunter2" {
		t.Errorf("HTTPURL = %v, %v", u, err)
	}
	// A password with a URL's own characters stays the password.
	odd := func(string) (string, bool) { return "12/tail?x#y@z", true }
	if u, err := job.Build.CacheURL.HTTPURL(odd); err != nil || u.Host != "kernels.lab" || u.Path != "/cache" {
		t.Errorf("with an odd password: %v, %v", u, err)
	} else if pw, _ := u.User.Password(); pw != "12/tail?x#y@z" {
		t.Errorf("with an odd password: it became %q", pw)
	}
	unset := func(string) (string, bool) { return "", false }
	if err := job.CheckEnv(unset); err == nil || !strings.Contains(err.Error(), "build.cache_url: environment variable CCACHE_REDIS_PASSWORD is not set") {
		t.Errorf("CheckEnv without the variable: %v", err)
	}
	for url, want := range map[string]string{
		"http://kernels.lab/cache":            "",
		"https://lab@kernels.lab:8443/":       "",
		"https://lab:hunter2@kernels.lab/c":   "the password is written here",
		"ftp://kernels.lab/cache":             "not an HTTP cache",
		"/srv/kernels":                        "not an HTTP cache",
		"http:///cache":                       "the URL names no host",
		"http://a/cache http://b/cache":       "one URL",
		"http://lab:x${PW}@kernels.lab/cache": "the password is written here",
		"http://${TOKEN}@kernels.lab/cache":   "only the password may be a ${NAME}",
		"http://kernels.lab/cache?t=${TOKEN}": "only the password may be a ${NAME}",
	} {
		_, diags := loadMem(t, map[string]string{"job.yaml": okJob + boot + hostBuild[:len(hostBuild)-2] + ", cache_url: \"" + url + "\"}\n"})
		if want == "" {
			noDiag(t, diags, "build.cache_url")
			continue
		}
		wantDiags(t, diags, "job.yaml:6:", "build.cache_url: "+want)
		for _, d := range diags {
			if strings.Contains(d, "hunter2") {
				t.Errorf("%q: the diagnostic repeats the password: %s", url, d)
			}
		}
	}
}
