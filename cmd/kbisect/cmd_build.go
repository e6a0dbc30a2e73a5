package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"kbisect/kbuild"
	"kbisect/lab"
)

func buildCommand() *cli.Command {
	return &cli.Command{
		Name:  "build",
		Usage: "build the kernel of a revision with the job's config, verified, cached",
		Description: `build builds the kernel of REV of the job's build.tree in a build slot of
its own (a git worktree and an output directory under build.cache_dir, so
your checkout is never touched and the next commit recompiles only what
changed): the base config (build.config), the job's fragments and options
merged over it, olddefconfig, then a check that every requested option
is in the final .config (a dropped CONFIG_PREEMPT_RT=y fails with what it
depends on), make, and the artifact: the image, System.map, the config,
the modules, kernel.release (<version>-kbisect-<12 hex of the commit>) and
a signature of the code. The same tree, config and toolchain come from the
cache. make's output goes to a log file.

EXAMPLES
   kbisect build --job configs/system-0.yaml --rev v6.12.78
   kbisect build --job configs/qemu-local.yaml --rev HEAD --json`,
		Flags: []cli.Flag{
			verboseFlag(),
			&cli.StringFlag{Name: "job", Required: true, Usage: "job file: its build section"},
			&cli.StringFlag{Name: "rev", Required: true, Usage: "the revision to build"},
			&cli.IntFlag{Name: "slot", Usage: "build slot (0, 1, … build side by side)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object on stdout"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			return runBuild(traceTo(c.Context, c.Bool("verbose"), c.App.ErrWriter), c.String("job"), c.String("rev"), c.Int("slot"), c.Bool("json"), c.App.Writer, c.App.ErrWriter)
		},
	}
}

func runBuild(ctx context.Context, jobFile, rev string, slot int, asJSON bool, stdout, stderr io.Writer) error {
	job, err := loadJob(jobFile, stderr)
	if err != nil {
		return err
	}
	commit, err := lab.ResolveCommit(ctx, job, rev)
	if err != nil {
		return usagef("build --rev: %v", err)
	}
	logDir := filepath.Join(string(job.Build.CacheDir), "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(logDir, "build-"+commit[:12]+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644) // a cache hit must not wipe the build's log
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Fprintf(stderr, "building %s (%s) in slot %d; make's output: %s\n", rev, commit[:12], slot, logPath)
	opt := lab.BuildOptions(job, log)
	if opt.Base, err = lab.BaseConfig(ctx, job, stderr); err != nil {
		return err
	}
	a, err := kbuild.Build(ctx, opt, slot, commit)
	if err != nil {
		return fmt.Errorf("build %s: %w", rev, err)
	}
	if asJSON {
		b, err := json.MarshalIndent(a, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return nil
	}
	from := fmt.Sprintf("built in %.1fs", a.Took.Seconds())
	if a.Cached {
		from = fmt.Sprintf("from the cache in %.1fs", a.Took.Seconds())
	}
	fmt.Fprintf(stdout, "artifact:  %s\nrelease:   %s\nsignature: %s\n%s (ccache: %v)\n", a.Dir, a.Release, a.Signature, from, a.CCache)
	return nil
}
