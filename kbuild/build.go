package kbuild

import (
	"context"
	"fmt"
	"io"
	"kbisect/internal/commitid"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Options say how kernels are built: the job's build section, resolved.
type Options struct {
	// Tree is the kernel git repository; kbisect never touches its
	// checkout, it builds in worktrees of its own.
	Tree string
	// Base is defconfig, tinyconfig, allnoconfig, <arch>_defconfig, or
	// the path of a config file.
	Base      string
	Fragments []string
	Inline    []string
	MakeVars  map[string]string
	Jobs      int  // 0: every CPU
	CCache    bool // when ccache is installed
	// CompilerWrapper is a compile farm's client and its arguments
	// (distcc, icecc): with ccache it is ccache's CCACHE_PREFIX, without
	// it the start of CC. It is not part of a kernel's identity.
	CompilerWrapper []string
	// CCacheRemote is ccache's remote storage (CCACHE_REMOTE_STORAGE),
	// its ${NAME}s expanded: a secret, put in make's environment only.
	CCacheRemote string
	CacheDir     string
	// CacheURL is another cache directory served over HTTP
	// (build.cache_url), its password expanded: a kernel the cache lacks
	// is fetched from there, checked, before it is built.
	CacheURL *url.URL
	// CacheSize caps the artifacts the cache keeps, in bytes: the least
	// recently used go first (0: no cap).
	CacheSize int64
	// Timeout bounds each make command: one that runs longer is killed
	// with its process group, a SetupError of FaultTimeout (0: none).
	Timeout time.Duration
	// Log receives make's output as it comes (a file in the state dir).
	Log io.Writer
	// Server, when set, builds what the cache does not have on a build
	// server (build.host) instead of here.
	Server Server
	// SpareSlots lets a build whose slot another kbisect holds take the
	// next free one of that many (0: it fails): kbisect build, which two
	// controllers sharing a build server's login may run at once.
	SpareSlots int
}

// Artifact is a built kernel in the cache.
type Artifact struct {
	Dir       string  `json:"dir"`
	Release   string  `json:"release"`
	Commit    string  `json:"commit"`
	Key       string  `json:"key"`
	Signature string  `json:"signature"`
	Cached    bool    `json:"cached"`
	Seconds   float64 `json:"seconds"`
	CCache    bool    `json:"ccache"`
	Compiler  string  `json:"compiler"`
	// TreeHash is the git tree the kernel was built from, ConfigHash the
	// sha256 of its final .config, Make the make variables it was built
	// with (the slot's paths and -j aside).
	TreeHash   string   `json:"tree_hash"`
	ConfigHash string   `json:"config_hash"`
	Make       []string `json:"make"`
	// Phases are the seconds spent in each step of the build that made
	// the artifact: checkout, configure, make, collect.
	Phases map[string]float64 `json:"phases"`
	// Files are the size and SHA-256 of every file of the artifact but
	// meta.json, as the build wrote them: a cache hit and an install
	// check them again (Check).
	Files map[string]FileSum `json:"files"`
	Took  time.Duration      `json:"-"`
}

// LocalVersion is what names a kernel by its commit: -kbisect-<12 hex>.
func LocalVersion(commit string) string { return "-kbisect-" + commitid.Short(commit) }

// Build builds the kernel of commit in a slot (a worktree and an output
// directory of its own), reusing the cache when the same tree, config,
// compiler and make variables were built before. A build that fails for
// the machine (a full or failing disk, memory, the compiler cache, a
// missing tool) is a *SetupError, one that fails for the commit's code a
// *BuildError.
func Build(ctx context.Context, o Options, slot int, commit string) (*Artifact, error) {
	a, err := build(ctx, o, slot, commit)
	return a, fileFault(err)
}

func build(ctx context.Context, o Options, slot int, commit string) (*Artifact, error) {
	start := time.Now()
	if o.Jobs <= 0 {
		o.Jobs = runtime.NumCPU()
	}
	if o.Server == nil {
		// With a build server, the client is the server's (its preflight).
		if err := o.checkWrapper(); err != nil {
			return nil, err
		}
	}
	req, err := LoadRequest(o.Fragments, append(append([]string{}, o.Inline...),
		fmt.Sprintf(`CONFIG_LOCALVERSION="%s"`, LocalVersion(commit)), "# CONFIG_LOCALVERSION_AUTO is not set"))
	if err != nil {
		return nil, err
	}
	// What went in before: the same inputs make the same .config, so the
	// cache answers without a checkout or a configure.
	cfgInputs, err := o.configInputs(ctx, req)
	if err != nil {
		return nil, err
	}
	inputs, err := o.inputKey(ctx, commit, cfgInputs)
	if err != nil {
		return nil, err
	}
	for _, r := range o.sweep() {
		o.logf("cache: removed %s, left by a kbisect that was killed", r)
	}
	if a := o.lookup(inputs); a != nil {
		a.Cached, a.Took = true, time.Since(start)
		if o.Log != nil {
			fmt.Fprintf(o.Log, "kbisect: %s: the cache has this kernel (%s)\n", commitid.Short(commit), a.Dir)
		}
		return a, nil
	}
	if o.CacheURL != nil {
		if a := o.fromHTTP(ctx, commit, inputs, start); a != nil {
			return a, nil
		}
	}
	if o.Server != nil {
		return o.buildOn(ctx, slot, commit, inputs, start)
	}
	s, err := openSlot(ctx, o, slot, commit)
	if err != nil {
		return nil, err
	}
	defer s.unlock()
	// Whatever becomes of it, the build's end is marked before the slot
	// is let go: the next checkout there waits until it is past.
	defer s.stampBuilt()
	phases := map[string]float64{}
	mark := time.Now()
	phase := func(name string) {
		now := time.Now()
		phases[name] = now.Sub(mark).Seconds()
		mark = now
	}
	if err := s.checkout(ctx, commit); err != nil {
		return nil, err
	}
	phase("checkout")
	m := o.maker(s)
	if err := s.configure(ctx, m, o.Base, req, cfgInputs, commit); err != nil {
		return nil, err
	}
	final, err := ReadConfigFile(filepath.Join(s.out, ".config"))
	if err != nil {
		return nil, err
	}
	if dropped := Verify(req, final, nil); len(dropped) > 0 {
		// Kconfig is read only to explain; when it cannot be read the
		// dropped options are still named.
		if kc, err := ReadKconfig(s.src, SrcArch(o.MakeVars["ARCH"])); err == nil {
			dropped = Verify(req, final, kc)
		}
		return nil, &ConfigError{Commit: commit, Dropped: dropped}
	}
	id, err := s.identify(ctx, commit, m)
	if err != nil {
		return nil, err
	}
	phase("configure")
	key := id.key
	dir := filepath.Join(o.CacheDir, "artifacts", key)
	if a := o.cachedAt(dir); a != nil {
		o.remember(inputs, key)
		a.Cached, a.Took = true, time.Since(start)
		m.note(fmt.Sprintf("%s: the cache has this kernel (%s)", commitid.Short(commit), dir))
		return a, nil
	}
	m.note(fmt.Sprintf("building %s: %s", commitid.Short(commit), strings.Join(m.argv(m.buildTargets(final)...), " ")))
	if m.ccache {
		m.note("ccache: used (" + m.ccacheVersion(ctx) + ")")
		if m.remote != "" {
			// The URL is not shown: it may hold a password.
			m.note("ccache: with the remote storage of build.ccache_remote")
		}
	} else if o.CCache {
		m.note("ccache: not used, it is not installed (Debian: apt-get install ccache)")
	} else {
		m.note("ccache: not used, build.ccache is false")
	}
	if len(m.wrapper) > 0 {
		m.note("compile farm: " + m.farmNote())
	}
	if err := m.build(ctx, final); err != nil {
		return nil, m.classify(err, commit)
	}
	phase("make")
	a, tmp, err := s.collect(ctx, m, dir, final)
	if err != nil {
		return nil, err
	}
	phase("collect")
	a.Commit, a.Key, a.Compiler, a.CCache = commit, key, id.compiler, m.ccache
	a.TreeHash, a.ConfigHash, a.Make, a.Phases = id.tree, id.config, id.make, phases
	a.Took = time.Since(start)
	a.Seconds = a.Took.Seconds()
	if a, err = o.publish(tmp, a); err != nil {
		return nil, err
	}
	o.remember(inputs, key)
	if o.CacheSize > 0 {
		removed, err := Evict(o.CacheDir, o.CacheSize, dir)
		for _, r := range removed {
			m.note("cache: evicted " + r)
		}
		if err != nil {
			m.note("cache: eviction stopped: " + err.Error())
		}
	}
	return a, nil
}
