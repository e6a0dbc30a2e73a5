package kbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kbisect/internal/commitid"
	"kbisect/internal/shell"
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
	CacheDir  string
	// CacheSize caps the artifacts the cache keeps, in bytes: the least
	// recently used go first (0: no cap).
	CacheSize int64
	// Log receives make's output as it comes (a file in the state dir).
	Log io.Writer
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
	Took   time.Duration      `json:"-"`
}

// BuildError is a commit whose kernel does not build: a bisection skips
// it (or calls it bad when the job bisects build failures).
type BuildError struct {
	Commit string
	Lines  []string // the first error lines of the log
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("%s does not build: %s", commitid.Short(e.Commit), strings.Join(e.Lines, " | "))
}

// SetupError is a build machine that cannot build any kernel: a tool or a
// library is missing, the disk is full, memory ran out. The run stops with
// what to do.
type SetupError struct{ Msg string }

func (e *SetupError) Error() string { return e.Msg }

// ConfigError is a configuration that does not have what the job asks:
// every dropped option, with its reason.
type ConfigError struct {
	Commit  string
	Dropped []Dropped
}

func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Dropped))
	for i, d := range e.Dropped {
		lines[i] = d.String()
	}
	return fmt.Sprintf("the config of %s lacks what the job asks: %s", commitid.Short(e.Commit), strings.Join(lines, "; "))
}

// LocalVersion is what names a kernel by its commit: -kbisect-<12 hex>.
func LocalVersion(commit string) string { return "-kbisect-" + commitid.Short(commit) }

// Build builds the kernel of commit in a slot (a worktree and an output
// directory of its own), reusing the cache when the same tree, config,
// compiler and make variables were built before.
func Build(ctx context.Context, o Options, slot int, commit string) (*Artifact, error) {
	start := time.Now()
	if o.Jobs <= 0 {
		o.Jobs = runtime.NumCPU()
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
	if a := o.lookup(inputs); a != nil {
		a.Cached, a.Took = true, time.Since(start)
		if o.Log != nil {
			fmt.Fprintf(o.Log, "kbisect: %s: the cache has this kernel (%s)\n", commitid.Short(commit), a.Dir)
		}
		return a, nil
	}
	s, err := openSlot(ctx, o, slot, commit)
	if err != nil {
		return nil, err
	}
	defer s.unlock()
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
	if a, err := loadArtifact(dir); err == nil {
		touch(dir)
		o.remember(inputs, key)
		a.Cached, a.Took = true, time.Since(start)
		m.note(fmt.Sprintf("%s: the cache has this kernel (%s)", commitid.Short(commit), dir))
		return a, nil
	}
	m.note(fmt.Sprintf("building %s: %s", commitid.Short(commit), strings.Join(m.argv(m.buildTargets(final)...), " ")))
	if m.ccache {
		m.note("ccache: used (" + m.ccacheVersion(ctx) + ")")
	} else if o.CCache {
		m.note("ccache: not used, it is not installed (Debian: apt-get install ccache)")
	} else {
		m.note("ccache: not used, build.ccache is false")
	}
	if err := m.build(ctx, final); err != nil {
		return nil, classify(err, commit, m.log.String())
	}
	phase("make")
	a, err := s.collect(ctx, m, dir, final)
	if err != nil {
		return nil, err
	}
	phase("collect")
	a.Commit, a.Key, a.Compiler, a.CCache = commit, key, id.compiler, m.ccache
	a.TreeHash, a.ConfigHash, a.Make, a.Phases = id.tree, id.config, id.make, phases
	a.Took = time.Since(start)
	a.Seconds = a.Took.Seconds()
	if err := writeMeta(dir, a); err != nil {
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

// maker runs make for a slot.
type maker struct {
	src, out string
	jobs     int
	vars     map[string]string
	ccache   bool
	log      *tailBuffer
	logTo    io.Writer
}

func (o Options) maker(s *slot) *maker {
	m := &maker{src: s.src, out: s.out, jobs: o.Jobs, vars: o.MakeVars, log: &tailBuffer{max: 256 << 10}, logTo: o.Log}
	if o.CCache {
		if _, err := exec.LookPath("ccache"); err == nil {
			m.ccache = true
		}
	}
	return m
}

// argv is make's command line for targets: the output directory, the
// fixed build identity (so the same source builds the same bytes), an
// empty LOCALVERSION (no "+" for a tree that is not at a tag), ccache and
// the job's variables.
func (m *maker) argv(targets ...string) []string {
	a := []string{"make", "-C", m.src, "O=" + m.out, "-j" + strconv.Itoa(m.jobs),
		"KBUILD_BUILD_TIMESTAMP=1970-01-01", "KBUILD_BUILD_USER=kbisect", "KBUILD_BUILD_HOST=kbisect", "LOCALVERSION="}
	var names []string
	for k := range m.vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if k == "CC" && m.ccache {
			continue
		}
		a = append(a, k+"="+m.vars[k])
	}
	if m.ccache {
		cc := m.vars["CC"]
		if cc == "" {
			cc = "gcc"
		}
		a = append(a, "CC=ccache "+cc)
	}
	return append(a, targets...)
}

// run runs make, its output to the log, its process group killed when ctx
// ends.
func (m *maker) run(ctx context.Context, targets ...string) error {
	argv := m.argv(targets...)
	shell.Trace(ctx, "", shell.Join(argv...))
	c := exec.Command(argv[0], argv[1:]...)
	var w io.Writer = m.log
	if m.logTo != nil {
		w = io.MultiWriter(m.log, m.logTo)
	}
	c.Stdout, c.Stderr = w, w
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		return &SetupError{Msg: fmt.Sprintf("cannot run make: %v (Debian: apt-get install build-essential)", err)}
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: %w", strings.Join(targets, " "), err)
		}
		return nil
	case <-ctx.Done():
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		<-done
		return ctx.Err()
	}
}

// imageTarget is the kernel image make target of the build's arch.
func (m *maker) imageTarget() string {
	switch SrcArch(m.vars["ARCH"]) {
	case "x86":
		return "bzImage"
	case "arm64", "riscv":
		return "Image"
	}
	return "vmlinux"
}

func (m *maker) buildTargets(final Config) []string {
	targets := []string{m.imageTarget()}
	if final.Get("CONFIG_MODULES") == "y" {
		targets = append(targets, "modules")
	}
	return targets
}

func (m *maker) build(ctx context.Context, final Config) error {
	return m.run(ctx, m.buildTargets(final)...)
}

// note writes a line of kbisect's own into the build log.
func (m *maker) note(line string) {
	if m.logTo != nil {
		fmt.Fprintf(m.logTo, "kbisect: %s\n", line)
	}
}

func (m *maker) ccacheVersion(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "ccache", "--version").Output()
	if err != nil {
		return "version unknown"
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

// compiler is the C compiler make will run, as the job names it.
func (m *maker) compiler() string {
	cc := m.vars["CC"]
	if cc == "" {
		cc = m.vars["CROSS_COMPILE"] + "gcc"
		if m.vars["LLVM"] == "1" {
			cc = "clang"
		}
	}
	return strings.Fields(cc)[0]
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	buf bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if t.buf.Len() > t.max {
		keep := t.buf.Bytes()[t.buf.Len()-t.max:]
		t.buf = *bytes.NewBuffer(append([]byte(nil), keep...))
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return t.buf.String() }

var (
	errorLine = regexp.MustCompile(`(?m)^.*(error:|Error \d+|undefined reference|\*\*\*).*$`)
	setupHint = []struct {
		re   *regexp.Regexp
		hint string
	}{
		{regexp.MustCompile(`No space left on device`), "the disk is full: free space in the build cache or the tree"},
		{regexp.MustCompile(`Cannot allocate memory|Killed signal terminated program|virtual memory exhausted`), "the compiler ran out of memory: lower build.jobs"},
		{regexp.MustCompile(`(flex|bison|bc|perl): (not found|No such file|command not found)`), "a build tool is missing: Debian: apt-get install flex bison bc perl"},
		{regexp.MustCompile(`gelf\.h: No such file|libelf.*not found|Cannot resolve BTF IDs`), "libelf is missing: Debian: apt-get install libelf-dev"},
		{regexp.MustCompile(`openssl/(opensslv|bio|evp)\.h: No such file`), "OpenSSL headers are missing: Debian: apt-get install libssl-dev"},
		{regexp.MustCompile(`pahole \(pahole\) is not available|pahole: (not found|command not found)`), "pahole is missing for CONFIG_DEBUG_INFO_BTF: Debian: apt-get install dwarves (or unset CONFIG_DEBUG_INFO_BTF)"},
		{regexp.MustCompile(`(cpio|zstd|lz4|lzop|xz|rsync): (not found|command not found)`), "a build tool is missing: Debian: apt-get install cpio zstd lz4 lzop xz-utils rsync"},
		{regexp.MustCompile(`(gcc|cc|ld): (not found|command not found)|No such file or directory: 'gcc'`), "the compiler is missing: Debian: apt-get install build-essential"},
	}
)

// classify tells a commit that does not build from a machine that cannot
// build.
func classify(err error, commit, log string) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var se *SetupError
	if errors.As(err, &se) {
		return err
	}
	for _, h := range setupHint {
		if h.re.MatchString(log) {
			return &SetupError{Msg: h.hint + " (" + strings.TrimSpace(h.re.FindString(log)) + ")"}
		}
	}
	lines := errorLine.FindAllString(log, 5)
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	if len(lines) == 0 {
		lines = []string{err.Error()}
	}
	return &BuildError{Commit: commit, Lines: lines}
}

// configInputs names what makes a .config but the commit: the base
// config (a make target, or a file's content), the request without
// CONFIG_LOCALVERSION, the compiler (Kconfig asks it what it supports)
// and make's variables.
func (o Options) configInputs(ctx context.Context, req Request) (string, error) {
	base := "target " + o.Base
	if !isMakeConfig(o.Base) {
		b, err := os.ReadFile(o.Base)
		if err != nil {
			return "", fmt.Errorf("build.config: %v", err)
		}
		sum := sha256.Sum256(b)
		base = "file " + hex.EncodeToString(sum[:])
	}
	var opts []Option
	for _, opt := range req.Options {
		if opt.Name != "CONFIG_LOCALVERSION" {
			opts = append(opts, opt)
		}
	}
	m := o.maker(&slot{})
	h := sha256.New()
	fmt.Fprintf(h, "base %s\ncompiler %s\nmake %q\nrequest\n%s", base, compilerVersion(ctx, m.compiler()), m.argv()[5:], Request{Options: opts}.Fragment())
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// inputKey names everything that goes into a commit's build before it is
// configured: its tree, its kernel release name and the config inputs.
// The same inputs make the same .config, hence the same kernel.
func (o Options) inputKey(ctx context.Context, commit, cfgInputs string) (string, error) {
	tree, err := git(ctx, o.Tree, "rev-parse", "--verify", "--quiet", commit+"^{tree}")
	if err != nil {
		return "", fmt.Errorf("build.tree %s has no commit %s", o.Tree, commitid.Short(commit))
	}
	h := sha256.Sum256([]byte("tree " + strings.TrimSpace(tree) + "\nrelease " + LocalVersion(commit) + "\nconfig " + cfgInputs + "\n"))
	return hex.EncodeToString(h[:16]), nil
}

// lookup returns the artifact built before from the same inputs.
func (o Options) lookup(inputs string) *Artifact {
	key, err := os.ReadFile(filepath.Join(o.CacheDir, "inputs", inputs))
	if err != nil {
		return nil
	}
	dir := filepath.Join(o.CacheDir, "artifacts", strings.TrimSpace(string(key)))
	a, err := loadArtifact(dir)
	if err != nil {
		return nil
	}
	touch(dir)
	return a
}

// remember notes which artifact the inputs built (best effort: without
// it the next build configures to find it).
func (o Options) remember(inputs, key string) {
	dir := filepath.Join(o.CacheDir, "inputs")
	if os.MkdirAll(dir, 0o755) != nil {
		return
	}
	tmp := filepath.Join(dir, "."+inputs+".tmp")
	if os.WriteFile(tmp, []byte(key+"\n"), 0o644) == nil {
		_ = os.Rename(tmp, filepath.Join(dir, inputs))
	}
}

func compilerVersion(ctx context.Context, cc string) string {
	out, err := exec.CommandContext(ctx, cc, "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.SplitN(string(out), "\n", 2)[0]
}

// identity is what makes a build: the commit's tree, the final .config,
// the compiler and the make variables; key is its content address.
type identity struct {
	key, tree, config, compiler string
	make                        []string
}

func (s *slot) identify(ctx context.Context, commit string, m *maker) (identity, error) {
	var id identity
	tree, err := git(ctx, s.src, "rev-parse", commit+"^{tree}")
	if err != nil {
		return id, err
	}
	id.tree = strings.TrimSpace(tree)
	cfg, err := os.ReadFile(filepath.Join(s.out, ".config"))
	if err != nil {
		return id, err
	}
	sum := sha256.Sum256(cfg)
	id.config = hex.EncodeToString(sum[:])
	id.compiler = compilerVersion(ctx, m.compiler())
	// The slot's own paths (-C, O=) and -j are not part of what is built.
	id.make = m.argv()[5:]
	h := sha256.New()
	fmt.Fprintf(h, "tree %s\ncompiler %s\nmake %q\nconfig %s\n", id.tree, id.compiler, id.make, id.config)
	id.key = hex.EncodeToString(h.Sum(nil))[:32]
	return id, nil
}

func writeMeta(dir string, a *Artifact) error {
	b, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "meta.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "meta.json"))
}

// loadArtifact returns the cached artifact of dir, complete only when its
// meta.json (written last) is there.
func loadArtifact(dir string) (*Artifact, error) {
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return nil, err
	}
	var a Artifact
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, err
	}
	a.Dir = dir
	return &a, nil
}
