package nightly

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"kbisect/configs"
	"kbisect/history"
	"kbisect/internal/usage"
	"kbisect/report"
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
	remote, err := expandRemote(r.Remote, os.LookupEnv)
	if err != nil {
		return Options{}, usage.Errorf("nightly --remote: %v", err)
	}
	o := Options{Job: job, JobFile: r.Job, Remote: remote, Branch: r.Branch, Tags: r.Tags, DB: r.DB}
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
		o.DB = defaultDB(wt.GitDir)
	}
	return o, nil
}

// defaultDB is where a tree's history is kept when no --db says.
func defaultDB(gitDir string) string { return filepath.Join(gitDir, "kbisect", "history.db") }

// MachineHistory reads the history of the job's machine from db ("": the
// job's tree's), for kbisect history.
func MachineHistory(ctx context.Context, jobFile, db string, messages io.Writer) (report.History, *configs.Job, error) {
	job, err := configs.Open(jobFile, messages)
	if err != nil {
		return report.History{}, nil, err
	}
	if db == "" {
		wt, err := worktree.Open(ctx, string(job.Build.Tree))
		if err != nil {
			return report.History{}, nil, usage.Errorf("build.tree %s: %v", job.Build.Tree, err)
		}
		db = defaultDB(wt.GitDir)
	}
	d, err := history.Open(ctx, db)
	if err != nil {
		return report.History{}, nil, err
	}
	defer d.Close()
	h, err := ReadHistory(ctx, d, job.Machine.Name)
	return h, job, err
}
