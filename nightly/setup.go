package nightly

import (
	"context"
	"io"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"kbisect/configs"
	"kbisect/internal/usage"
	"kbisect/worktree"
)

// Request is what kbisect nightly is asked: the job file, where the
// releases come from, and the history database ("": the tree's).
type Request struct {
	Job, Remote, Branch, Tags, DB string
}

// Setup checks a request and the job file it names, and fills the night's
// options but for the bisection and the progress, which are the caller's.
// What is wrong is a usage error; Options.Job is set once the job loaded.
func Setup(ctx context.Context, r Request, messages io.Writer) (Options, error) {
	switch {
	case r.Job == "":
		return Options{}, usage.Errorf("nightly: --job FILE is required")
	case r.Remote == "":
		return Options{}, usage.Errorf("nightly: --remote URL is required (where the releases are fetched from)")
	case strings.HasPrefix(r.Remote, "-"):
		return Options{}, usage.Errorf("nightly --remote %q: a URL or a path, not an option", r.Remote)
	}
	if r.Branch != "" {
		if err := exec.CommandContext(ctx, "git", "check-ref-format", "--branch", r.Branch).Run(); err != nil || strings.ContainsAny(r.Branch, "*?[") {
			return Options{}, usage.Errorf("nightly --branch %q: not a branch name", r.Branch)
		}
	}
	if _, err := path.Match(r.Tags, "v6.12.1"); err != nil {
		return Options{}, usage.Errorf("nightly --tags %q: %v", r.Tags, err)
	}
	job, err := configs.Open(r.Job, messages)
	if err != nil {
		return Options{}, err
	}
	o := Options{Job: job, JobFile: r.Job, Remote: r.Remote, Branch: r.Branch, Tags: r.Tags, DB: r.DB}
	if err := job.CheckEnv(nil); err != nil {
		return o, usage.Errorf("nightly --job %v (set it, or run validate to see where it is used)", err)
	}
	tree := string(job.Build.Tree)
	wt, err := worktree.Open(ctx, tree)
	if err != nil {
		return o, usage.Errorf("build.tree %s: %v", tree, err)
	}
	o.GitDir = wt.GitDir
	if o.DB == "" {
		o.DB = filepath.Join(wt.GitDir, "kbisect", "history.db")
	}
	return o, nil
}
