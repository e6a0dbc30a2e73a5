package kbuild

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// serveDir serves dir over HTTP on 127.0.0.1, as a web server exporting a
// controller's cache directory would, asking for user and password; it
// returns the base URL (without them) and the paths it was asked for.
func serveDir(t *testing.T, dir, user, password string) (string, func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	files := http.FileServer(http.Dir(dir))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="kernels"`)
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		files.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/kernels", func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), asked...)
	}
}

// TestTheHTTPCacheServesASecondControllersKernels: a controller's cache
// directory served over HTTP gives a second controller the kernel the
// first built, not built again and the same to the byte (checked against
// its sums); a kernel it lacks, one damaged there, and a server that is
// down or refuses the password are each built here instead, the password
// never in the log.
func TestTheHTTPCacheServesASecondControllersKernels(t *testing.T) {
	tree, commits := fakeTree(t,
		map[string]string{"kernel/eventpoll.c": "int ep_poll_callback(void) { return 2; }\n"})
	ctx := context.Background()
	first := buildOptions(t, tree)
	want, err := Build(ctx, first, 0, commits[0])
	if err != nil {
		t.Fatal(err)
	}
	served := t.TempDir()
	if err := os.Symlink(first.CacheDir, filepath.Join(served, "kernels")); err != nil {
		t.Fatal(err)
	}
	const password = "s3cret-of-the-lab"
	base, asked := serveDir(t, served, "lab", password)
	withAuth := strings.Replace(base, "http://", "http://lab:"+password+"@", 1)

	second := func() (Options, *bytes.Buffer) {
		o := buildOptions(t, tree)
		var log bytes.Buffer
		o.Log, o.CacheURL = &log, mustURL(t, withAuth)
		return o, &log
	}
	o, log := second()
	got, err := Build(ctx, o, 0, commits[0])
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if !got.Cached || got.Key != want.Key || got.Signature != want.Signature || !reflect.DeepEqual(got.Files, want.Files) {
		t.Errorf("from the HTTP cache: %+v\nthe first controller's: %+v", got, want)
	}
	if got.Dir != filepath.Join(o.CacheDir, "artifacts", want.Key) || Check(got.Dir) != nil {
		t.Errorf("published in %s, want the second controller's own cache, checked", got.Dir)
	}
	if slots, _ := filepath.Glob(filepath.Join(o.CacheDir, "slots", "*", "*")); len(slots) != 0 {
		t.Errorf("the second controller made build slots %v: it built", slots)
	}
	if !strings.Contains(log.String(), "from the HTTP cache "+base+", checked") || strings.Contains(log.String(), password) {
		t.Errorf("the log does not say where the kernel came from, or shows the password:\n%s", log)
	}
	if a := asked(); len(a) != 2+len(want.Files) {
		t.Errorf("asked the HTTP cache for %v: want the input key, meta.json and the %d files", a, len(want.Files))
	}
	// Now in the second controller's own cache: HTTP is not asked again.
	n := len(asked())
	if again, err := Build(ctx, o, 0, commits[0]); err != nil || !again.Cached || len(asked()) != n {
		t.Errorf("second build: %+v %v, after %d requests more", again, err, len(asked())-n)
	}

	// A kernel the HTTP cache lacks is built here.
	o, log = second()
	if a, err := Build(ctx, o, 0, commits[1]); err != nil || a.Cached {
		t.Fatalf("a kernel the HTTP cache lacks: %+v %v\n%s", a, err, log)
	}

	// One damaged there (a byte changed on the server's disk) is refused
	// and built here: the same kernel as the first controller's.
	victim := filepath.Join(want.Dir, "bzImage")
	data, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(victim, data, 0o644); err != nil {
		t.Fatal(err)
	}
	o, log = second()
	rebuilt, err := Build(ctx, o, 0, commits[0])
	if err != nil || rebuilt.Cached || rebuilt.Signature != want.Signature {
		t.Fatalf("with the HTTP cache's bzImage damaged: %+v %v\n%s", rebuilt, err, log)
	}
	if !strings.Contains(log.String(), "damaged") || !strings.Contains(log.String(), "bzImage") || !strings.Contains(log.String(), "building it") {
		t.Errorf("the log does not say the HTTP cache's kernel was damaged:\n%s", log)
	}
	if left, _ := filepath.Glob(filepath.Join(o.CacheDir, "artifacts", "*.tmp")); len(left) != 0 {
		t.Errorf("the damaged download left %v", left)
	}

	// A wrong password, and a server that is not there: built here, the
	// log saying why and showing no password.
	for _, to := range []string{strings.Replace(withAuth, password, "not-the-password", 1), "http://127.0.0.1:1/kernels"} {
		o, log = second()
		o.CacheURL = mustURL(t, to)
		if a, err := Build(ctx, o, 0, commits[0]); err != nil || a.Cached {
			t.Fatalf("cache_url %s: %+v %v\n%s", to, a, err, log)
		}
		if !strings.Contains(log.String(), "building it") || strings.Contains(log.String(), "not-the-password") {
			t.Errorf("cache_url %s: the log does not say why it built, or shows the password:\n%s", to, log)
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
