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
