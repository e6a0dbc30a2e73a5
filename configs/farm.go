package configs

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
)

// StorageURL is ccache's remote storage as a job file writes it
// (build.ccache_remote: redis://${CCACHE_REDIS_PASSWORD}@cache:6379). Its
// password, if any, is a ${NAME} of the environment: the text, shown and
// stored, never holds the secret; Expand makes the URL ccache is given.
type StorageURL string

// MarshalYAML writes the URL as written, variables unexpanded.
func (u StorageURL) MarshalYAML() (any, error) { return string(u), nil }

// Refs returns the ${NAME} variables the URL uses, sorted.
func (u StorageURL) Refs() []string { return Command(u).Refs() }

// Expand returns the URL with its ${NAME}s replaced by the environment's
// values (lookup: os.LookupEnv when nil), or an error naming the unset
// ones. The result is a secret: for ccache's environment only.
func (u StorageURL) Expand(lookup func(string) (string, bool)) (string, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if _, err := Command(u).Env(lookup); err != nil {
		return "", err
	}
	return envRef.ReplaceAllStringFunc(string(u), func(ref string) string {
		name := strings.TrimSuffix(strings.TrimPrefix(ref, "${"), "}")
		if ref == `\$` {
			return "$"
		} else if strings.HasPrefix(name, "KBISECT_") {
			return ref // kbisect's own names are not the environment's (Refs)
		}
		v, _ := lookup(name)
		return v
	}), nil
}

// secretAttr names the attributes of a remote storage that hold secrets.
var secretAttr = regexp.MustCompile(`(?i)password|token|secret|auth`)

// isEnvRef says whether s is a ${NAME} and nothing else.
func isEnvRef(s string) bool {
	m := envRef.FindStringSubmatchIndex(s)
	return m != nil && m[0] == 0 && m[1] == len(s) && m[2] >= 0
}

// storageSchemes are the remote storages ccache 4.7 knows.
var storageSchemes = []string{"redis", "redis+unix", "http", "file"}

// envKeys are the keys that may hold ${NAME}: the commands and ccache's
// remote storage.
func (j *Job) envKeys() map[string][]string {
	refs := map[string][]string{}
	for key, c := range j.Commands() {
		refs[key] = c.Refs()
	}
	refs["build.ccache_remote"] = j.Build.CCacheRemote.Refs()
	refs["build.cache_url"] = j.Build.CacheURL.Refs()
	return refs
}

// Wrapper is build.compiler_wrapper as a command and its arguments.
func (b Build) Wrapper() []string { return strings.Fields(b.CompilerWrapper) }

// validateFarm checks the compile farm's keys: ccache can run the client
// (whether it is installed is the preflight's question: validate may run
// elsewhere), and the remote storage is ccache's, with ccache on and no
// password written into the file.
func (l *loader) validateFarm() {
	bu := &l.job.Build
	if u := string(bu.CacheURL); u != "" {
		if msg := cacheURLProblem(u); msg != "" {
			l.errorf(l.at("build.cache_url"), "build.cache_url", "%s", msg)
		}
	}
	if w := bu.Wrapper(); len(w) > 0 {
		const key = "build.compiler_wrapper"
		switch {
		case w[0] == "ccache":
			l.errorf(l.at(key), key, "ccache is build.ccache: true; name the compile farm's client here (distcc, icecc)")
		case bu.CCache && len(w) > 1:
			l.errorf(l.at(key), key, "with build.ccache, ccache runs the client as its CCACHE_PREFIX, which takes programs, not arguments: give them in the client's environment (DISTCC_HOSTS) or a script of yours")
		}
	}
	if bu.CCacheRemote == "" {
		return
	}
	const key = "build.ccache_remote"
	if !bu.CCache {
		l.errorf(l.at(key), key, "ccache's remote storage needs build.ccache: true")
	}
	n := l.nodeOf(key)
	off := 0
	for _, u := range strings.Fields(string(bu.CCacheRemote)) {
		at := l.at(key)
		if n != nil {
			off += strings.Index(string(n.Value[off:]), u)
			at = l.valuePos(n, off)
		}
		if msg := storageProblem(u); msg != "" {
			l.errorf(at, key, "%s", msg)
		}
		off += len(u)
	}
}

// storageProblem says what is wrong with one of ccache's remote storages:
// a scheme ccache does not know, or a password written out (it would be
// shown by config show and kept in the state).
func storageProblem(u string) string {
	u, attrs, _ := strings.Cut(u, "|") // ccache's attributes: |name=value
	for _, attr := range strings.Split(attrs, "|") {
		name, value, _ := strings.Cut(attr, "=")
		if secretAttr.MatchString(name) && !isEnvRef(value) {
			return "the " + name + " is written here: put it in an environment variable and write ${NAME} in its place"
		}
	}
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok || !slices.Contains(storageSchemes, scheme) {
		return fmt.Sprintf("not a ccache remote storage: write %s://…", strings.Join(storageSchemes, "://…, "))
	}
	host, _, _ := strings.Cut(rest, "/")
	userinfo, _, ok := strings.Cut(host, "@")
	if !ok {
		return ""
	}
	user, password, hasPassword := strings.Cut(userinfo, ":")
	if !hasPassword && strings.HasPrefix(scheme, "redis") {
		password, hasPassword = user, true // redis://PASSWORD@host
	}
	if hasPassword && !isEnvRef(password) {
		return "the password is written here: put it in an environment variable and write ${NAME} in its place (redis://${CCACHE_REDIS_PASSWORD}@host:6379)"
	}
	return ""
}

// HTTPURL returns build.cache_url as a URL, its password the value of
// its ${NAME} in the environment (lookup: os.LookupEnv when nil), escaped
// as a URL's: a secret, for the HTTP requests alone.
func (u StorageURL) HTTPURL(lookup func(string) (string, bool)) (*url.URL, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	scheme, rest, _ := strings.Cut(string(u), "://")
	host, path, _ := strings.Cut(rest, "/")
	userinfo, hostport, hasUser := strings.Cut(host, "@")
	if !hasUser {
		hostport, userinfo = userinfo, ""
	}
	parsed, err := url.Parse(scheme + "://" + hostport + "/" + path)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %v", err)
	}
	if hasUser {
		user, ref, hasPassword := strings.Cut(userinfo, ":")
		parsed.User = url.User(user)
		if hasPassword {
			password, err := StorageURL(ref).Expand(lookup)
			if err != nil {
				return nil, err
			}
			parsed.User = url.UserPassword(user, password)
		}
	}
	return parsed, nil
}

// cacheURLProblem says what is wrong with build.cache_url: not one
// http(s) URL of a directory, a password written out, or a ${NAME}
// elsewhere than the password (it would show in the logs).
func cacheURLProblem(u string) string {
	if strings.ContainsAny(u, " \t\n") {
		return "one URL: the HTTP cache is a single directory"
	}
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok || scheme != "http" && scheme != "https" {
		return "not an HTTP cache: write http://host/path or https://host/path (a cache directory a web server serves)"
	}
	host, _, _ := strings.Cut(rest, "/")
	userinfo, hostport, ok := strings.Cut(host, "@")
	if !ok {
		hostport = userinfo
	}
	if hostport == "" {
		return "the URL names no host: write " + scheme + "://host/path"
	}
	user, password, has := strings.Cut(userinfo, ":")
	if ok && has && !isEnvRef(password) {
		return "the password is written here: put it in an environment variable and write ${NAME} in its place (https://lab:${KERNELS_PASSWORD}@cache.lab/kernels)"
	}
	if strings.Contains(user, "$") || strings.Contains(strings.TrimPrefix(u, scheme+"://"+userinfo), "${") {
		return "only the password may be a ${NAME} (https://lab:${KERNELS_PASSWORD}@cache.lab/kernels): the rest of the URL shows in the logs"
	}
	if _, err := url.Parse(scheme + "://" + hostport + "/"); err != nil {
		return "not a URL: " + err.Error()
	}
	return ""
}
