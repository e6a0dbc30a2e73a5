package lab

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"kbisect/configs"
)

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
