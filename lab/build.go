package lab

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"kbisect/configs"
	"kbisect/kbuild"
)

// BuildOptions turns a job's build section into kbuild's options.
func BuildOptions(job *configs.Job, log io.Writer) kbuild.Options {
	b := job.Build
	o := kbuild.Options{Tree: string(b.Tree), Base: b.Config, Inline: b.Options, MakeVars: b.MakeVars,
		Jobs: b.Jobs, CCache: b.CCache, CacheDir: string(b.CacheDir), Log: log}
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
