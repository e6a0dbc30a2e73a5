package kbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kbisect/internal/shell"
)

// maker runs make for a slot.
type maker struct {
	src, out string
	cacheDir string
	jobs     int
	vars     map[string]string
	ccache   bool
	// wrapper is the compile farm's client (distcc, icecc) that runs
	// each compile; remote is ccache's remote storage URL, a secret
	// that goes into make's environment only, never into a log.
	wrapper []string
	remote  string
	timeout time.Duration // 0: none but ctx's
	log     *tailBuffer
	logTo   io.Writer
	// slot is where make runs (nil: make is not run, only its command
	// line asked).
	slot *slot
}

func (o Options) maker(s *slot) *maker {
	m := &maker{src: s.src, out: s.out, cacheDir: o.CacheDir, jobs: o.Jobs, vars: o.MakeVars, timeout: o.Timeout,
		log: &tailBuffer{max: 256 << 10}, logTo: o.Log, wrapper: o.CompilerWrapper}
	if s.out != "" {
		m.slot = s
	}
	if o.CCache {
		if _, err := exec.LookPath("ccache"); err == nil {
			m.ccache, m.remote = true, o.CCacheRemote
		}
	}
	return m
}

// env is make's environment: kbisect's own, and with ccache the compile
// farm's client as ccache's prefix command (ccache looks the result up
// first and sends only its misses to the farm), its remote storage, and
// the slot as ccache's base directory unless one is set: the slot's paths
// are rewritten relative, so that another slot, or another controller
// with its cache elsewhere, hits what this one compiled.
func (m *maker) env() []string {
	env := os.Environ()
	if !m.ccache {
		return env
	}
	if _, set := os.LookupEnv("CCACHE_BASEDIR"); !set && m.src != "" {
		env = append(env, "CCACHE_BASEDIR="+filepath.Dir(m.src))
	}
	if len(m.wrapper) > 0 {
		env = append(env, "CCACHE_PREFIX="+strings.Join(m.wrapper, " "))
	}
	if m.remote != "" {
		// The URLs' secrets in variables of their own, which ccache
		// expands: a '$' in a password is then the password's, where
		// ccache would take it for a variable of the URL (and say part
		// of the password in its error).
		value, vars := RemoteStorage(m.remote)
		env = append(append(env, vars...), "CCACHE_REMOTE_STORAGE="+value)
	}
	return env
}

// argv is make's command line for targets: the output directory, the
// fixed build identity (so the same source builds the same bytes), an
// empty LOCALVERSION (no "+" for a tree that is not at a tag), ccache or
// the compile farm's client in CC, and the job's variables.
func (m *maker) argv(targets ...string) []string {
	return m.line(true, targets)
}

// identityVars are make's variables that decide what is built: the
// command line without the slot's paths, -j and the compile farm's
// client, which compiles the same objects elsewhere.
func (m *maker) identityVars() []string {
	return m.line(false, nil)[5:]
}

// line is make's command line, with the compile farm's client or not.
func (m *maker) line(farm bool, targets []string) []string {
	a := []string{"make", "-C", m.src, "O=" + m.out, "-j" + strconv.Itoa(m.jobs),
		"KBUILD_BUILD_TIMESTAMP=1970-01-01", "KBUILD_BUILD_USER=kbisect", "KBUILD_BUILD_HOST=kbisect", "LOCALVERSION="}
	var names []string
	for k := range m.vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if k == "CC" && (m.ccache || farm && len(m.wrapper) > 0) {
			continue
		}
		a = append(a, k+"="+m.vars[k])
	}
	switch {
	case m.ccache:
		// The farm's client, if any, is ccache's CCACHE_PREFIX (env).
		a = append(a, "CC=ccache "+m.ccCommand())
	case farm && len(m.wrapper) > 0:
		a = append(a, "CC="+strings.Join(m.wrapper, " ")+" "+m.ccCommand())
	}
	return append(a, targets...)
}

// ccCommand is the C compiler command make would run: make_vars.CC, else
// the kernel's own choice ($(CROSS_COMPILE)gcc, or clang with LLVM=1).
func (m *maker) ccCommand() string {
	if cc := strings.TrimSpace(m.vars["CC"]); cc != "" {
		return cc
	}
	if m.vars["LLVM"] == "1" {
		return "clang"
	}
	return m.vars["CROSS_COMPILE"] + "gcc"
}

// run runs make, its output to the log, stopped when ctx ends or the
// build's timeout passes (a lab fault: a hung compiler or a machine too
// slow for the timeout, never the commit's). make runs in a process group
// of its own, so that a Ctrl-C on kbisect's terminal does not cut a build
// short behind kbisect's back, and is told to stop (SIGTERM) if kbisect
// dies: a killed kbisect leaves no make writing into the slot.
func (m *maker) run(ctx context.Context, targets ...string) error {
	argv := m.argv(targets...)
	shell.Trace(ctx, "", shell.Join(argv...))
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = m.env()
	var w io.Writer = m.log
	if m.logTo != nil {
		w = io.MultiWriter(m.log, m.logTo)
	}
	c.Stdout, c.Stderr = w, w
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := c.Start(); err != nil {
		return &SetupError{Msg: fmt.Sprintf("cannot run make: %v (Debian: apt-get install build-essential)", err)}
	}
	if m.slot != nil {
		m.slot.noteMake(c.Process.Pid)
	}
	oom := oomKills()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var expired <-chan time.Time
	if m.timeout > 0 {
		t := time.NewTimer(m.timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case err := <-done:
		if err == nil {
			return nil
		}
		me := &makeError{targets: targets, err: err}
		if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			me.signal = ws.Signal()
		}
		if now := oomKills(); oom >= 0 && now > oom {
			me.oomKills = now - oom
		}
		return me
	case <-ctx.Done():
		m.stop(c.Process.Pid, done)
		return ctx.Err()
	case <-expired:
		m.stop(c.Process.Pid, done)
		return &SetupError{Fault: FaultTimeout, Msg: fmt.Sprintf(hintTimeout, strings.Join(targets, " "), durationText(m.timeout)),
			Evidence: outputEvidence(m.log.String())}
	}
}

// stop ends the make of process group pgid as Ctrl-C on a terminal does:
// SIGINT to the whole group, so every compiler stops and make deletes the
// targets it was writing, then waits for it. A make that does not end
// within settleWait, or a group that does not empty, is killed, and the
// slot is suspect: the next build there removes what this one wrote.
func (m *maker) stop(pgid int, done <-chan error) {
	_ = syscall.Kill(-pgid, syscall.SIGINT)
	clean := true
	select {
	case <-done:
	case <-time.After(settleWait):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
		clean = false
	}
	if !groupGone(pgid, settleWait) {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		clean = false
	}
	if !clean && m.slot != nil {
		m.slot.suspect = true
	}
}

// groupGone waits, at most wait, for process group pgid to have no
// process left but zombies (an init may be slow to reap the orphans),
// and says whether it has none.
func groupGone(pgid int, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for syscall.Kill(-pgid, 0) == nil && groupLive(pgid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// durationText writes a duration as a job file does: 3h, 1h30m, 10s.
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// classify tells why make failed: the build machine's fault, measured
// now, or the commit's (see classify).
func (m *maker) classify(err error, commit string) error {
	if err == nil {
		return nil
	}
	var me *makeError
	if !errors.As(err, &me) {
		return classify(err, commit, m.log.String(), buildFacts{})
	}
	return classify(err, commit, m.log.String(), measureRooms(m.out, m.src, m.cacheDir, os.TempDir(), m.ccacheDir()))
}

// ccacheDir is ccache's directory when the build uses ccache.
func (m *maker) ccacheDir() string {
	if !m.ccache {
		return ""
	}
	return ccacheDir()
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
	return strings.Fields(m.ccCommand())[0]
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

// remoteStorageVar holds a remote storage URL's part after its scheme:
// the i-th URL's in remoteStorageVar_i.
const remoteStorageVar = "KBISECT_CCACHE_REMOTE"

// RemoteStorage splits build.ccache_remote, expanded, into what ccache is
// given (each URL's scheme, the rest a ${NAME} that ccache expands) and
// the variables that hold the rest, secrets included: they reach ccache,
// or a build server, in the environment, never in a command line or a
// file.
func RemoteStorage(urls string) (value string, env []string) {
	var words []string
	for i, u := range strings.Fields(urls) {
		scheme, rest, _ := strings.Cut(u, "://")
		if ref, ok := strings.CutPrefix(rest, "${"); ok && strings.HasSuffix(ref, "}") && !strings.ContainsAny(ref[:len(ref)-1], "${}") {
			// Already a variable of the environment (a build server's
			// job names the one its controller sent): ccache expands it.
			words = append(words, u)
			continue
		}
		name := fmt.Sprintf("%s_%d", remoteStorageVar, i)
		words = append(words, scheme+"://${"+name+"}")
		env = append(env, name+"="+rest)
	}
	return strings.Join(words, " "), env
}
