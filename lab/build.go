package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"kbisect/configs"
	"kbisect/internal/atomicfile"
	"kbisect/kbuild"
)

// BuildOptions turns a job's build section into kbuild's options.
func BuildOptions(job *configs.Job, log io.Writer) kbuild.Options {
	b := job.Build
	o := kbuild.Options{Tree: string(b.Tree), Base: b.Config, Inline: b.Options, MakeVars: b.MakeVars,
		Jobs: b.Jobs, CCache: b.CCache, CacheDir: string(b.CacheDir), CacheSize: int64(b.CacheSize), Log: log}
	for _, f := range b.Fragments {
		o.Fragments = append(o.Fragments, string(f))
	}
	return o
}

// ResolveCommit names a revision of the job's tree by its full hash.
func ResolveCommit(ctx context.Context, job *configs.Job, rev string) (string, error) {
	if strings.HasPrefix(rev, "-") {
		return "", fmt.Errorf("%q is not a revision", rev)
	}
	out, err := exec.CommandContext(ctx, "git", "-C", string(job.Build.Tree), "rev-parse", "--verify", "--quiet", rev+"^{commit}").Output()
	if err != nil {
		return "", fmt.Errorf("build.tree %s has no commit %q", job.Build.Tree, rev)
	}
	return strings.TrimSpace(string(out)), nil
}

// BaseConfig is the base config a job's kernels build from: build.config
// itself, or, for "host", the config of the kernel the lab host runs,
// fetched once over SSH and kept in the cache directory
// (host-configs/<machine>.config) so that every kernel of a bisection
// starts from the same base, whatever kernel the host boots later.
func BaseConfig(ctx context.Context, job *configs.Job, say io.Writer) (string, error) {
	if job.Build.Config != configs.ConfigHost {
		return job.Build.Config, nil
	}
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == '\\' {
			return '_'
		}
		return r
	}, job.Machine.Name)
	if name == "" || name == "." || name == ".." {
		name = "host-" + job.Host.Address
	}
	path := filepath.Join(string(job.Build.CacheDir), "host-configs", name+".config")
	if _, err := os.Stat(path); err == nil {
		fmt.Fprintf(say, "base config: %s (fetched from the host before; remove it to fetch again)\n", path)
		return path, nil
	}
	h, err := DialHost(ctx, job)
	if err != nil {
		return "", fmt.Errorf("build.config host: %w", err)
	}
	defer h.Close()
	cfg, release, err := h.RunningConfig(ctx)
	if err != nil {
		return "", fmt.Errorf("build.config host: %w", err)
	}
	if strings.Contains(release, "-kbisect-") {
		return "", fmt.Errorf("build.config host: %s runs %s, a kernel kbisect built: its config is kbisect's, not the machine's; boot the machine's own kernel once, or give build.config a file", h.Name(), release)
	}
	header := fmt.Sprintf("# kbisect: the config of %s on %s, fetched %s\n", release, h.Name(), time.Now().UTC().Format(time.RFC3339))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := atomicfile.WriteFile(path, append([]byte(header), cfg...)); err != nil {
		return "", err
	}
	fmt.Fprintf(say, "base config: %s (%s's running %s)\n", path, h.Name(), release)
	return path, nil
}
