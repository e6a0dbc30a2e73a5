package lab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"go.yaml.in/yaml/v3"

	"kbisect/configs"
	"kbisect/internal/shell"
	"kbisect/kbuild"
	"kbisect/remote"
)

// What the server keeps of kbisect's, under its login's $HOME.
const (
	serverBin   = "/.cache/kbisect/bin"
	serverJobs  = "/.cache/kbisect/jobs"
	serverCache = "/.cache/kbisect/build-cache"
)

// tree returns the server's $HOME and the absolute path of its clone
// (build.remote_tree, relative to $HOME unless absolute), or a SetupError
// saying how to make the clone.
func (s *BuildServer) tree(ctx context.Context, h *remote.Host) (home, tree string, err error) {
	t, _ := strings.CutPrefix(s.Tree, "~/")
	out, _, err := h.Run(ctx, shell.Cmd{Script: "cd \"$HOME\" && printf '%s\\n' \"$HOME\" && cd " + shell.Quote(t) + " && git rev-parse --git-dir >/dev/null && pwd -P"})
	var ee *shell.ExitError
	if errors.As(err, &ee) {
		return "", "", &kbuild.SetupError{Fault: kbuild.FaultTool, Msg: fmt.Sprintf(
			"build server %s: build.remote_tree %s is not a git clone there: make one (git clone URL %s), or fix build.remote_tree", h.Name(), s.Tree, s.Tree),
			Evidence: []string{strings.TrimSpace(ee.Stderr)}}
	}
	if err != nil {
		return "", "", err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		return "", "", fmt.Errorf("build server %s: its home and tree are %q", h.Name(), out)
	}
	return lines[0], lines[1], nil
}

// serverArch is what uname -sm says on a machine this kbisect runs on.
func serverArch() (string, bool) {
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i686", "riscv64": "riscv64",
		"ppc64le": "ppc64le", "s390x": "s390x", "loong64": "loongarch64"}[runtime.GOARCH]
	return "Linux " + arch, runtime.GOOS == "linux" && arch != ""
}

// kbisect returns the kbisect to run on the server: build.host_kbisect,
// or this one's executable, shipped once under its SHA-256 (to a
// temporary name, then renamed: a kbisect there is always whole).
func (s *BuildServer) kbisect(ctx context.Context, h *remote.Host, home string) (string, error) {
	if s.Kbisect != "" {
		return s.Kbisect, nil
	}
	where := "build server " + h.Name()
	uname, _, err := h.Run(ctx, shell.Cmd{Script: "uname -sm"})
	if err != nil {
		return "", err
	}
	got := strings.TrimSpace(string(uname))
	if want, ok := serverArch(); !ok || got != want && !(want == "Linux aarch64" && got == "Linux arm64") {
		return "", &kbuild.SetupError{Fault: kbuild.FaultTool, Msg: fmt.Sprintf(
			"%s is %s, this kbisect is built for %s/%s: install kbisect there and set build.host_kbisect to its path", where, got, runtime.GOOS, runtime.GOARCH)}
	}
	sum, err := fileSHA256(s.Exe)
	if err != nil {
		return "", fmt.Errorf("the kbisect to ship to the build server: %v", err)
	}
	bin := home + serverBin
	path := bin + "/kbisect-" + sum[:16]
	if _, _, err := h.Run(ctx, shell.Cmd{Script: "test -x " + shell.Quote(path)}); err == nil {
		return path, nil
	}
	f, err := os.Open(s.Exe)
	if err != nil {
		return "", err
	}
	defer f.Close()
	q := shell.Quote(path)
	script := "set -e; mkdir -p " + shell.Quote(bin) + "; t=$(mktemp " + q + ".XXXXXX); trap 'rm -f \"$t\"' EXIT; trap 'exit 1' HUP INT TERM; cat >\"$t\"; chmod 755 \"$t\"; " +
		"s=$(sha256sum \"$t\"); if [ \"${s%% *}\" != " + sum + " ]; then echo 'the copy differs' >&2; exit 1; fi; mv -f \"$t\" " + q
	if _, _, err := h.Send(ctx, script, f); err != nil {
		return "", fmt.Errorf("%s: shipping kbisect: %w", where, err)
	}
	return path, nil
}

// fileSHA256 is the hex SHA-256 of a file.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// sendCommit makes sure the server's clone has commit: when it does not,
// the commits it lacks go from this controller's tree as a thin pack,
// against the server's ref tips this tree also has, and a ref
// (refs/kbisect/<commit>) keeps them from git gc.
func (s *BuildServer) sendCommit(ctx context.Context, h *remote.Host, o kbuild.Options, tree, commit string) error {
	git := "git -C " + shell.Quote(tree)
	if _, _, err := h.Run(ctx, shell.Cmd{Script: git + " cat-file -e " + shell.Quote(commit+"^{commit}")}); err == nil {
		return nil
	}
	tips, _, err := h.Run(ctx, shell.Cmd{Script: git + " for-each-ref --format='%(objectname)'"})
	if err != nil {
		return fmt.Errorf("build server %s: listing the refs of %s: %w", h.Name(), tree, err)
	}
	haves, err := localCommits(ctx, o.Tree, strings.Fields(string(tips)))
	if err != nil {
		return err
	}
	revs := commit + "\n--not\n" + strings.Join(haves, "\n") + "\n"
	pack := exec.CommandContext(ctx, "git", "-C", o.Tree, "pack-objects", "--revs", "--thin", "--stdout", "-q")
	pack.Stdin = strings.NewReader(revs)
	var packErr bytes.Buffer
	pack.Stderr = &packErr
	out, err := pack.StdoutPipe()
	if err != nil {
		return err
	}
	if err := pack.Start(); err != nil {
		return err
	}
	counted := &countingReader{r: out}
	_, _, err = h.Send(ctx, git+" index-pack --stdin --fix-thin >/dev/null && "+git+" update-ref "+shell.Quote("refs/kbisect/"+commit)+" "+shell.Quote(commit), counted)
	if err != nil {
		// The server stopped reading (a full disk, a lost connection):
		// pack-objects would block on its pipe for ever.
		_ = pack.Process.Kill()
	}
	_, _ = io.Copy(io.Discard, out) // Wait closes the pipe: read it to its end first
	if werr := pack.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("git pack-objects in %s: %v: %s", o.Tree, werr, strings.TrimSpace(packErr.String()))
	}
	if err != nil {
		return fmt.Errorf("build server %s: sending %s to %s: %w", h.Name(), commit[:12], tree, err)
	}
	if o.Log != nil {
		fmt.Fprintf(o.Log, "kbisect: %s: sent to the build server's tree as a pack of %d bytes (against %d of its refs)\n", commit[:12], counted.n, len(haves))
	}
	return nil
}

// localCommits are the names among shas that are commits of tree.
func localCommits(ctx context.Context, tree string, shas []string) ([]string, error) {
	if len(shas) == 0 {
		return nil, nil
	}
	c := exec.CommandContext(ctx, "git", "-C", tree, "cat-file", "--batch-check=%(objectname) %(objecttype)")
	c.Stdin = strings.NewReader(strings.Join(shas, "\n") + "\n")
	out, err := c.Output()
	if err != nil {
		return nil, fmt.Errorf("git cat-file in %s: %v", tree, err)
	}
	seen := map[string]bool{}
	var have []string
	for _, line := range strings.Split(string(out), "\n") {
		if sha, kind, _ := strings.Cut(line, " "); kind == "commit" && !seen[sha] {
			seen[sha] = true
			have = append(have, sha)
		}
	}
	return have, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// sendJob writes the job the server's kbisect builds with, with the
// base config and fragments beside it, into a directory of its own there;
// cleanup removes it.
func (s *BuildServer) sendJob(ctx context.Context, h *remote.Host, o kbuild.Options, home, tree string) (string, func(), error) {
	local, err := os.MkdirTemp("", "kbisect-buildjob-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(local)
	build := map[string]any{"tree": tree, "cache_dir": home + serverCache, "ccache": o.CCache}
	if s.CacheSize > 0 {
		build["cache_size"] = configs.Size(s.CacheSize).String()
	}
	copyIn := func(src, name string) (string, error) {
		b, err := os.ReadFile(src)
		if err != nil {
			return "", err
		}
		return name, os.WriteFile(filepath.Join(local, name), b, 0o644)
	}
	if configs.IsMakeConfig(o.Base) {
		build["config"] = o.Base
	} else if build["config"], err = copyIn(o.Base, "base.config"); err != nil {
		return "", nil, fmt.Errorf("build.config: %v", err)
	}
	var frags []string
	for i, f := range o.Fragments {
		name, err := copyIn(f, fmt.Sprintf("fragment-%02d-%s", i, filepath.Base(f)))
		if err != nil {
			return "", nil, fmt.Errorf("build.fragments: %v", err)
		}
		frags = append(frags, name)
	}
	set := func(key string, v any, ok bool) {
		if ok {
			build[key] = v
		}
	}
	set("fragments", frags, len(frags) > 0)
	set("options", o.Inline, len(o.Inline) > 0)
	set("make_vars", o.MakeVars, len(o.MakeVars) > 0)
	set("jobs", o.Jobs, o.Jobs > 0)
	set("compiler_wrapper", strings.Join(o.CompilerWrapper, " "), len(o.CompilerWrapper) > 0)
	storage, _ := kbuild.RemoteStorage(o.CCacheRemote)
	set("ccache_remote", storage, storage != "")
	set("timeout", configs.Duration(o.Timeout).String(), o.Timeout > 0)
	job := map[string]any{"apiVersion": "kbisect/v1", "kind": "Job", "machine": map[string]any{"name": "build-server"},
		// Sections kbisect build does not read, present to be valid.
		"boot":     map[string]any{"method": "qemu", "params": "nohz_full=1 isolcpus=nohz,domain,managed_irq,1 rcu_nocbs=1 irqaffinity=0"},
		"workload": map[string]any{"tool": "oslat", "duration": "10s"},
		"verdict":  map[string]any{"threshold": "2ms"},
		"build":    build}
	text, err := yaml.Marshal(job)
	if err != nil {
		return "", nil, err
	}
	head := "# kbisect: written by a controller for one build on this server; removed after it\n"
	if err := os.WriteFile(filepath.Join(local, "job.yaml"), append([]byte(head), text...), 0o644); err != nil {
		return "", nil, err
	}
	dir, _, err := h.Run(ctx, shell.Cmd{Script: "mkdir -p " + shell.Quote(home+serverJobs) + " && mktemp -d " + shell.Quote(home+serverJobs+"/job-XXXXXX")})
	if err != nil {
		return "", nil, fmt.Errorf("build server %s: %w", h.Name(), err)
	}
	remoteDir := strings.TrimSpace(string(dir))
	cleanup := func() {
		// Best effort: a job directory left behind is a few KiB.
		_, _, _ = h.Run(context.WithoutCancel(ctx), shell.Cmd{Script: "rm -rf " + shell.Quote(remoteDir)})
	}
	if _, err := h.Copy(ctx, local, remoteDir); err != nil {
		cleanup()
		return "", nil, err
	}
	return remoteDir + "/job.yaml", cleanup, nil
}
