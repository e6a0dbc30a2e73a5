package main

import (
	"context"
	"io"
	"kbisect/report"
	"kbisect/run"

	"github.com/urfave/cli/v2"
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
	a, err := run.Build(ctx, jobFile, rev, slot, stderr)
	switch {
	case err != nil:
		return err
	case asJSON:
		report.WriteJSON(stdout, a)
	default:
		report.WriteArtifact(stdout, a)
	}
	return nil
}
