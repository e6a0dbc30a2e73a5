package kbuild

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"kbisect/internal/atomicfile"
)

// The HTTP kernel cache (build.cache_url) is another controller's cache
// directory served over HTTP, read only: the same layout, inputs/<input
// key> naming the artifact that artifacts/<key>/ holds. A kernel the local
// cache lacks is looked up there before it is built; what comes is
// checked file by file against its meta.json (sizes and SHA-256) and
// published in the local cache as a build's would be. The HTTP cache is
// never needed: when it is down, slow or wrong, the kernel is built.

// httpLimit bounds what one response may bring: a meta.json or an input
// key is small, an artifact file is at most its meta.json's size, which
// may not pass maxHTTPFile; an artifact has at most maxHTTPFiles files.
// (The cache is trusted as a build server is: the sums catch damage on
// the way, not a server that lies.)
const (
	httpLimit    = 1 << 20
	maxHTTPFile  = 4 << 30
	maxHTTPFiles = 32
)

// httpTimeout bounds one request's wait for the answer's headers, and
// with a second for every MiB it may bring, the whole request: a server
// that stops sending mid-file does not hang the run.
const httpTimeout = 30 * time.Second

var httpClient = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, ResponseHeaderTimeout: httpTimeout}}

// fromHTTP fetches the kernel of commit by its inputs from the HTTP cache
// into the local cache. It returns nil (and logs why) when the HTTP cache
// does not have it or cannot give it whole.
func (o Options) fromHTTP(ctx context.Context, commit, inputs string, start time.Time) *Artifact {
	base := *o.CacheURL
	// Only this shows in the log: the user, password and query stay out.
	where := base.Scheme + "://" + base.Host + base.Path
	get := func(rel string, w io.Writer, limit int64) (bool, error) {
		u := base
		u.Path = path.Join(u.Path, rel)
		u.RawPath = ""
		return httpGet(ctx, &u, w, limit)
	}
	var key strings.Builder
	found, err := get("inputs/"+inputs, &key, httpLimit)
	switch {
	case err != nil:
		o.logf("cache_url %s: %v: building it", where, err)
		return nil
	case !found:
		return nil
	}
	k := strings.TrimSpace(key.String())
	if !keyName.MatchString(k) {
		o.logf("cache_url %s: inputs/%s names %q, not an artifact: building it", where, inputs, k)
		return nil
	}
	tmp, err := o.staging("http-" + k[:12])
	if err != nil {
		o.logf("cache: %v", err)
		return nil
	}
	a, err := download(get, tmp, k)
	if err == nil {
		a, err = o.adopt(tmp, commit, k, inputs, start)
	} else {
		os.RemoveAll(tmp)
	}
	if err != nil {
		o.logf("cache_url %s: the kernel of %s: %v: building it", where, commit[:12], err)
		return nil
	}
	o.logf("%s: from the HTTP cache %s, checked and published in %s", commit[:12], where, a.Dir)
	a.Cached = true // not built: a cache's
	return a
}

// download brings the artifact key's meta.json and every file it lists
// into dir, each at most the size meta.json gives it.
func download(get func(string, io.Writer, int64) (bool, error), dir, key string) (*Artifact, error) {
	var meta strings.Builder
	found, err := get("artifacts/"+key+"/meta.json", &meta, httpLimit)
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, fmt.Errorf("artifacts/%s/meta.json is not there", key)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "meta.json"), []byte(meta.String())); err != nil {
		return nil, err
	}
	a, err := loadArtifact(dir)
	if err != nil {
		return nil, fmt.Errorf("artifacts/%s/meta.json: %v", key, err)
	}
	if len(a.Files) > maxHTTPFiles {
		return nil, fmt.Errorf("artifacts/%s/meta.json lists %d files, an artifact has at most %d", key, len(a.Files), maxHTTPFiles)
	}
	for name, sum := range a.Files {
		if name != filepath.Base(name) || name == "meta.json" || strings.HasPrefix(name, ".") {
			return nil, fmt.Errorf("artifacts/%s/meta.json lists %q, not a file of an artifact", key, name)
		}
		if sum.Size < 0 || sum.Size > maxHTTPFile {
			return nil, fmt.Errorf("artifacts/%s/meta.json gives %s %d bytes, more than a kernel's file may be", key, name, sum.Size)
		}
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		found, err := get("artifacts/"+key+"/"+name, f, sum.Size)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		switch {
		case err != nil:
			return nil, fmt.Errorf("artifacts/%s/%s: %v", key, name, err)
		case !found:
			return nil, fmt.Errorf("artifacts/%s/%s is not there", key, name)
		}
	}
	return a, nil
}

// httpGet writes what u answers into w: false when it is not there (404
// or 410), an error when the server fails, answers more than limit bytes,
// or stops answering.
func httpGet(ctx context.Context, u *url.URL, w io.Writer, limit int64) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, httpTimeout+time.Duration(limit>>20)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its URL holds the password
		}
		return false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return false, nil
	case resp.StatusCode != http.StatusOK:
		return false, fmt.Errorf("the server answered %s", resp.Status)
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return false, err
	}
	if n > limit {
		return false, fmt.Errorf("more than the %d bytes it should be", limit)
	}
	return true, nil
}
