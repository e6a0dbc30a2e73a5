package kbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"kbisect/configs"
	"kbisect/internal/commitid"
	"kbisect/internal/shell"
)

// slot is one build slot: a git worktree of the tree and an output
// directory, reused commit after commit so make rebuilds only what
// changed; locked while in use.
type slot struct {
	src, out string
	lock     *os.File
	// suspect: a make here was cut short and did not end cleanly; the
	// slot's mark stays for the next build to settle.
	suspect bool
}

// openSlot prepares slot n of the tree under the cache directory: a
// detached worktree made once, and its own O= directory. With
// o.SpareSlots, a slot another kbisect holds is passed over for the next
// free one.
func openSlot(ctx context.Context, o Options, n int, commit string) (*slot, error) {
	if o.CacheDir == "" {
		return nil, fmt.Errorf("kbuild: no cache directory")
	}
	common, err := git(ctx, o.Tree, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return nil, fmt.Errorf("build.tree %s is not a git repository: %v", o.Tree, err)
	}
	id := sha256.Sum256([]byte(strings.TrimSpace(common)))
	slots := filepath.Join(o.CacheDir, "slots", hex.EncodeToString(id[:6]))
	var s *slot
	asked := n
	for try := n; s == nil; try++ {
		base := filepath.Join(slots, fmt.Sprintf("slot-%d", try))
		s, err = lockSlot(base)
		switch {
		case err == nil:
			n = try
		case !errors.Is(err, errSlotInUse):
			return nil, err
		case o.SpareSlots == 0:
			return nil, fmt.Errorf("build slot %d is in use by another kbisect (%s)", try, base)
		case try+1 >= asked+o.SpareSlots:
			return nil, fmt.Errorf("build slots %d-%d are all in use by other kbisects (%s): end one, or give this one another build.cache_dir", asked, try, slots)
		}
	}
	if n != asked {
		o.logf("build slot %d is another kbisect's: building in slot %d", asked, n)
	}
	if err := s.claim(o.logf); err != nil {
		s.suspect = true // the mark stays: settled on the next try
		s.unlock()
		return nil, err
	}
	base := filepath.Dir(s.src)
	// The slot is ours: a temporary file in it is a killed kbisect's.
	_ = os.Remove(filepath.Join(s.out, ".config"+tempSuffix))
	if _, err := os.Stat(filepath.Join(s.src, ".git")); err != nil {
		// A worktree of the user's repository that kbisect alone uses:
		// the user's own checkout is never touched. git names a new
		// worktree's admin directory after the first free name, so two
		// slots made at once could get the same: one at a time.
		if err := s.makeWorktree(ctx, o.Tree, filepath.Dir(base), commit); err != nil {
			s.unlock()
			return nil, fmt.Errorf("making build slot %d: %v", n, err)
		}
	}
	return s, nil
}

// errSlotInUse is a slot another kbisect holds.
var errSlotInUse = errors.New("build slot in use")

// lockSlot takes the slot of directory base, made when new.
func lockSlot(base string) (*slot, error) {
	s := &slot{src: filepath.Join(base, "src"), out: filepath.Join(base, "out")}
	if err := os.MkdirAll(s.out, 0o755); err != nil {
		return nil, err
	}
	var err error
	if s.lock, err = os.OpenFile(filepath.Join(base, "lock"), os.O_CREATE|os.O_RDWR, 0o644); err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(s.lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		s.lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errSlotInUse
		}
		return nil, err
	}
	return s, nil
}

// makeWorktree adds the slot's worktree, holding the lock of the slots'
// directory while git picks its name.
func (s *slot) makeWorktree(ctx context.Context, tree, slots, commit string) error {
	lock, err := os.OpenFile(filepath.Join(slots, "worktree.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := waitLock(ctx, lock, worktreeLockWait); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	_, _ = git(ctx, tree, "worktree", "prune")
	_, err = git(ctx, tree, "worktree", "add", "--detach", "--force", s.src, commit)
	return err
}

// worktreeLockWait bounds the wait for another kbisect making a slot:
// it holds the lock for two git commands of at most 10 minutes each.
const worktreeLockWait = 30 * time.Minute

// waitLock takes f's lock, waiting at most wait for another process to
// let go of it, and no longer than ctx lasts.
func waitLock(ctx context.Context, f *os.File, wait time.Duration) error {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil || !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		select {
		case <-poll.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%s has been held by another kbisect for more than %s: a build slot is being made there and it hangs; end that kbisect", f.Name(), wait)
		}
	}
}

func (s *slot) unlock() {
	if s.lock != nil {
		s.release()
		_ = syscall.Flock(int(s.lock.Fd()), syscall.LOCK_UN)
		s.lock.Close()
	}
}

// checkout moves the slot to commit. git rewrites only the files that
// differ and leaves the others, mtimes and all, so make recompiles only
// what changed; anything left in the source tree (the build writes to
// O=) is removed.
func (s *slot) checkout(ctx context.Context, commit string) error {
	if err := s.waitPastBuild(ctx); err != nil {
		return err
	}
	if _, err := git(ctx, s.src, "reset", "-q", "--hard"); err != nil {
		return err
	}
	if _, err := git(ctx, s.src, "clean", "-q", "-fdx"); err != nil {
		return err
	}
	if _, err := git(ctx, s.src, "checkout", "-q", "--detach", commit); err != nil {
		return fmt.Errorf("checking out %s in the build slot: %v", commitid.Short(commit), err)
	}
	return nil
}

// configure writes the slot's .config: the base, the request merged over
// it (as merge_config.sh -m does), then olddefconfig. When the slot was
// configured from the same inputs for a commit whose Kconfig files and
// config fragments are those of this one, the result would be the same
// .config but for CONFIG_LOCALVERSION: that line is set and the make
// runs are saved (several seconds a step on a kernel tree).
func (s *slot) configure(ctx context.Context, m *maker, base string, req Request, inputs, commit string) error {
	cfg := filepath.Join(s.out, ".config")
	stateFile := filepath.Join(s.out, ".kbisect-configured")
	if st, err := os.ReadFile(stateFile); err == nil {
		prev, prevInputs, _ := strings.Cut(strings.TrimSpace(string(st)), " ")
		if prevInputs == inputs && prev != "" {
			if changed, err := kconfigChanged(ctx, s.src, prev, commit); err == nil && !changed {
				if err := setLocalVersion(cfg, LocalVersion(commit)); err == nil {
					m.note(fmt.Sprintf("config: the one of %s with CONFIG_LOCALVERSION=\"%s\" (no Kconfig file or config fragment changed)", commitid.Short(prev), LocalVersion(commit)))
					return os.WriteFile(stateFile, []byte(commit+" "+inputs+"\n"), 0o644)
				}
			}
		}
	}
	// A configure that fails halfway must not be reused.
	if err := os.Remove(stateFile); err != nil && !os.IsNotExist(err) {
		return err
	}
	switch {
	case isMakeConfig(base):
		if err := m.run(ctx, base); err != nil {
			return m.classify(err, "")
		}
	default:
		b, err := os.ReadFile(base)
		if err != nil {
			return fmt.Errorf("build.config: %v", err)
		}
		if err := os.WriteFile(cfg, b, 0o644); err != nil {
			return err
		}
	}
	b, err := os.ReadFile(cfg)
	if err != nil {
		return err
	}
	if err := os.WriteFile(cfg, mergeConfig(b, req), 0o644); err != nil {
		return err
	}
	if err := m.run(ctx, "olddefconfig"); err != nil {
		return m.classify(err, "")
	}
	return os.WriteFile(stateFile, []byte(commit+" "+inputs+"\n"), 0o644)
}

// kconfigChanged says whether anything that shapes a .config differs
// between two commits: Kconfig files, config fragments and defconfigs
// (*/configs/*), kconfig itself, and the top Makefile.
func kconfigChanged(ctx context.Context, dir, from, to string) (bool, error) {
	out, err := git(ctx, dir, "diff", "--name-only", "--no-renames", from, to)
	if err != nil {
		return true, err
	}
	for _, p := range strings.Split(strings.TrimSpace(out), "\n") {
		name := filepath.Base(p)
		switch {
		case p == "":
		case strings.HasPrefix(name, "Kconfig"), p == "Makefile",
			strings.HasPrefix(p, "scripts/kconfig/"), strings.Contains("/"+p, "/configs/"):
			return true, nil
		}
	}
	return false, nil
}

// setLocalVersion sets CONFIG_LOCALVERSION in a .config that has it.
func setLocalVersion(path, version string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.SplitAfter(string(b), "\n")
	found := false
	for i, l := range lines {
		if strings.HasPrefix(l, "CONFIG_LOCALVERSION=") {
			lines[i], found = fmt.Sprintf("CONFIG_LOCALVERSION=\"%s\"\n", version), true
		}
	}
	if !found {
		return fmt.Errorf("%s has no CONFIG_LOCALVERSION", path)
	}
	tmp := path + tempSuffix
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "")), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// tempSuffix names the slot's temporary files.
const tempSuffix = ".kbisect-tmp"

func isMakeConfig(base string) bool {
	return base == "defconfig" || base == "tinyconfig" || base == "allnoconfig" || strings.HasSuffix(base, "_defconfig")
}

// mergeConfig merges the request over a base .config as merge_config.sh
// does: each requested symbol's line leaves its place and the request's
// lines come last, in the request's order. kconfig lets the last of a
// choice's alternatives set to y win, so a fragment's CONFIG_HZ_1000=y
// beats the base's CONFIG_HZ_250=y (sorted, the base's could come after).
func mergeConfig(base []byte, req Request) []byte {
	asked := map[string]bool{}
	for _, o := range req.Options {
		asked[o.Name] = true
	}
	var b bytes.Buffer
	for _, line := range strings.SplitAfter(string(base), "\n") {
		if line == "" {
			continue
		}
		if o, err := configs.ParseConfigLine(strings.TrimSuffix(line, "\n")); err == nil && asked[o.Name] {
			continue
		}
		b.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			b.WriteByte('\n')
		}
	}
	b.WriteString(req.Fragment())
	return b.Bytes()
}

// collect puts the build's outputs into the artifact directory: the image,
// System.map, .config, kernel.release, the stripped modules as a tarball
// (modules.tar: what goes into /lib/modules/<release>), and the signature
// of vmlinux. It writes them into a temporary directory of its own beside
// dir (<key>.<random>.tmp: builders sharing the cache never write into
// each other's) and returns it; publish gives it dir's name.
func (s *slot) collect(ctx context.Context, m *maker, dir string, final Config) (*Artifact, string, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".*.tmp")
	if err != nil {
		return nil, "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, "", err
	}
	a, err := s.collectInto(ctx, m, tmp, final)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, "", err
	}
	a.Dir = dir
	return a, tmp, nil
}

func (s *slot) collectInto(ctx context.Context, m *maker, tmp string, final Config) (*Artifact, error) {
	rel, err := os.ReadFile(filepath.Join(s.out, "include", "config", "kernel.release"))
	if err != nil {
		return nil, fmt.Errorf("no kernel.release after the build: %v", err)
	}
	release := strings.TrimSpace(string(rel))
	image := imagePath(s.out, m.imageTarget())
	for src, dst := range map[string]string{image: m.imageTarget(), filepath.Join(s.out, "System.map"): "System.map", filepath.Join(s.out, ".config"): "config"} {
		if err := copyFile(src, filepath.Join(tmp, dst)); err != nil {
			return nil, err
		}
	}
	if err := writeSynced(filepath.Join(tmp, "kernel.release"), []byte(release+"\n")); err != nil {
		return nil, err
	}
	if final.Get("CONFIG_MODULES") == "y" {
		stage := filepath.Join(s.out, "kbisect-modules")
		os.RemoveAll(stage)
		if err := m.run(ctx, "modules_install", "INSTALL_MOD_PATH="+stage, "INSTALL_MOD_STRIP=1"); err != nil {
			return nil, m.classify(err, "")
		}
		mods := filepath.Join(stage, "lib", "modules", release)
		_ = os.Remove(filepath.Join(mods, "build"))
		_ = os.Remove(filepath.Join(mods, "source"))
		if err := writeTarball(filepath.Join(tmp, "modules.tar"), mods); err != nil {
			return nil, err
		}
		os.RemoveAll(stage)
	}
	sig, err := Signature(filepath.Join(s.out, "vmlinux"))
	if err != nil {
		return nil, err
	}
	sums, err := sumFiles(tmp)
	if err != nil {
		return nil, err
	}
	return &Artifact{Release: release, Signature: sig, Files: sums}, nil
}

func imagePath(out, target string) string {
	switch target {
	case "bzImage":
		return filepath.Join(out, "arch", "x86", "boot", "bzImage")
	case "Image":
		return filepath.Join(out, "arch", "arm64", "boot", "Image")
	}
	return filepath.Join(out, target)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeSynced writes a new file of an artifact and syncs it.
func writeSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var localVersionRe = []byte("-kbisect-")

// Signature hashes what a kernel is: the allocated sections of vmlinux
// that are not notes (the build id changes with anything), with the
// commit's own -kbisect-<hex> name blanked out, so two commits that build
// the same code have the same signature.
func Signature(vmlinux string) (string, error) {
	f, err := elf.Open(vmlinux)
	if err != nil {
		return "", fmt.Errorf("signature: %v", err)
	}
	defer f.Close()
	h := sha256.New()
	for _, sec := range f.Sections {
		if sec.Flags&elf.SHF_ALLOC == 0 || sec.Type == elf.SHT_NOTE || sec.Type == elf.SHT_NOBITS {
			continue
		}
		data, err := sec.Data()
		if err != nil {
			return "", fmt.Errorf("signature: %s: %v", sec.Name, err)
		}
		fmt.Fprintf(h, "%s %d\n", sec.Name, len(data))
		h.Write(blankLocalVersion(data))
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// blankLocalVersion replaces the 12 hex digits after each "-kbisect-".
func blankLocalVersion(data []byte) []byte {
	i := bytes.Index(data, localVersionRe)
	if i < 0 {
		return data
	}
	out := append([]byte(nil), data...)
	for i >= 0 {
		start := i + len(localVersionRe)
		for j := start; j < start+12 && j < len(out); j++ {
			out[j] = 'x'
		}
		next := bytes.Index(out[start:], localVersionRe)
		if next < 0 {
			break
		}
		i = start + next
	}
	return out
}

// git runs git in dir and returns its output.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	argv := append([]string{"git", "-C", dir}, args...)
	shell.Trace(ctx, "", shell.Join(argv...))
	// Not killed when ctx ends (a build ahead made way): a git killed in
	// the middle of a reset or checkout leaves index.lock behind, and the
	// slot's next build fails on it. Bounded on its own instead.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
