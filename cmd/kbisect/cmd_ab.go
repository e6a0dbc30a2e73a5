package main

import (
	"context"
	"io"

	"github.com/urfave/cli/v2"

	"kbisect/report"
	"kbisect/run"
)

// abOptions are kbisect ab's flags: the comparison's, and how to print.
type abOptions struct {
	run.ABOptions
	Args          []string // stray arguments: an error
	Line          []string // the command line, for the one that resumes
	JSON, Verbose bool
}

func abCommand() *cli.Command {
	return &cli.Command{
		Name:  "ab",
		Usage: "measure two kernels in alternating rounds and say whether and how much they differ",
		UsageText: `kbisect ab --job FILE --a REV --b REV
   kbisect ab --job FILE --base REV --revert SHA     # B = base with SHA reverted
   kbisect ab --job FILE --base REV --patch FILE     # B = base with the patch applied
       [--rounds N] [--samples N] [--state DIR] [--json] [-v]`,
		Description: helpText(abHelp),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "job", Required: true, Usage: "job file of the lab machine"},
			&cli.StringFlag{Name: "a", Usage: "kernel A: a revision of build.tree"},
			&cli.StringFlag{Name: "b", Usage: "kernel B: a revision of build.tree"},
			&cli.StringFlag{Name: "base", Usage: "kernel A, and the base B is made from (with --revert or --patch)"},
			&cli.StringFlag{Name: "revert", Usage: "B is --base with this commit reverted"},
			&cli.StringFlag{Name: "patch", Usage: "B is --base with this patch applied (a git format-patch mail, or a diff)"},
			&cli.IntFlag{Name: "rounds", Usage: "boots per side (default: the job's verdict.boots, at least 5)"},
			&cli.IntFlag{Name: "samples", Usage: "samples per boot (default: the job's verdict.samples.min)"},
			&cli.StringFlag{Name: "state", Usage: "state directory (default: <git-dir>/kbisect/ab-<id>)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object on stdout at the end"},
			verboseFlag(),
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			o := abOptions{Args: c.Args().Slice(), Line: cliArgs(c), JSON: c.Bool("json"), Verbose: c.Bool("verbose"), ABOptions: run.ABOptions{
				Job: c.String("job"), A: c.String("a"), B: c.String("b"), Base: c.String("base"), Revert: c.String("revert"),
				Patch: c.String("patch"), Rounds: c.Int("rounds"), Samples: c.Int("samples"), State: c.String("state")}}
			return runAB(c.Context, o, c.App.Writer, c.App.ErrWriter)
		},
	}
}

// runAB compares the two kernels the flags name and prints the answer.
func runAB(ctx context.Context, o abOptions, stdout, stderr io.Writer) error {
	if len(o.Args) > 0 {
		return usagef("ab: unexpected argument %q (the kernels go in --a and --b, or --base with --revert or --patch)", o.Args[0])
	}
	ctx = traceTo(ctx, o.Verbose, stderr)
	ao := o.ABOptions
	ao.Messages, ao.Progress = stderr, newView(stderr)
	res, err := run.AB(ctx, ao)
	if res != nil {
		err = resumable(ctx, err, res.JSON.StateDir, commandLine(o.Line, res.JSON.StateDir))
	}
	switch {
	case res == nil:
		return err
	case o.JSON:
		report.WriteJSON(stdout, res.JSON)
		if err != nil {
			return &reportedError{err}
		}
		return nil
	case err != nil:
		return err
	}
	return report.WriteABText(stdout, res.Job, res.Comparison)
}
