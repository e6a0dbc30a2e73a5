package kbuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"kbisect/internal/commitid"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

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
	fmt.Fprintf(h, "base %s\ncompiler %s\nmake %q\nrequest\n%s", base, compilerVersion(ctx, m.compiler()), m.identityVars(), Request{Options: opts}.Fragment())
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

// compilerVersion asks the compiler its version, within a minute: a
// compiler that hangs must not hang the run (what it started may hold
// the pipe, hence the WaitDelay).
func compilerVersion(ctx context.Context, cc string) string {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, cc, "--version")
	c.WaitDelay = time.Second
	out, err := c.Output()
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
	// The slot's own paths (-C, O=), -j and the compile farm are not part
	// of what is built.
	id.make = m.identityVars()
	h := sha256.New()
	fmt.Fprintf(h, "tree %s\ncompiler %s\nmake %q\nconfig %s\n", id.tree, id.compiler, id.make, id.config)
	id.key = hex.EncodeToString(h.Sum(nil))[:32]
	return id, nil
}
