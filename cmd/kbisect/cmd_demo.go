package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"kbisect/internal/shell"
	"kbisect/internal/simlab"
	"kbisect/internal/simnoise"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:        "demo",
		Usage:       "bisect a simulated lab end to end (about 25 s on an idle 2-core machine)",
		Description: helpText(demoHelp),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print run's JSON object on stdout"},
			&cli.Int64Flag{Name: "seed", Value: 1, Usage: "which history, regression and noise"},
			&cli.IntFlag{Name: "commits", Value: 400, Usage: "commits in the generated history (60 to 5000)"},
			&cli.StringFlag{Name: "dir", Usage: "keep the lab here; the same command again resumes it (default: a temporary directory, removed after)"},
			&cli.IntFlag{Name: "machines", Value: 1, Usage: "identical simulated machines bisecting together (1 to 8)"},
			&cli.StringFlag{Name: "noise", Usage: "give the machines the noise real ones have: `SETTINGS` as spread=0.2,boot-spread=0.25,bad-boots=5%,spikes=5%:2-20x,flips=1%"},
			verboseFlag(),
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			o := demoOptions{Seed: c.Int64("seed"), Commits: c.Int("commits"), Machines: c.Int("machines"), Dir: c.String("dir"),
				Noise: c.String("noise"), JSON: c.Bool("json"), Verbose: c.Bool("verbose"), Line: cliArgs(c)}
			return runDemo(c.Context, o, c.App.Writer, c.App.ErrWriter)
		},
	}
}

type demoOptions struct {
	Seed              int64
	Commits, Machines int
	Dir               string
	// Noise is the noise model's settings, as simnoise.Parse reads them
	// ("": none).
	Noise         string
	JSON, Verbose bool
	// Line is the command line, for the one that resumes.
	Line []string
}

// command is the demo's own command line: with the same seed it makes the
// same lab and finds the same commit; with --dir it resumes or answers
// from the state there.
func (o demoOptions) command() string {
	args := []string{"kbisect", "demo"}
	if o.Dir != "" {
		args = append(args, "--dir", o.Dir)
	}
	args = append(args, "--seed", strconv.FormatInt(o.Seed, 10), "--commits", strconv.Itoa(o.Commits))
	if o.Machines != 1 {
		args = append(args, "--machines", strconv.Itoa(o.Machines))
	}
	if o.Noise != "" {
		args = append(args, "--noise", o.Noise)
	}
	return shell.Join(args...)
}

func runDemo(ctx context.Context, o demoOptions, stdout, stderr io.Writer) error {
	if o.Commits < 60 || o.Commits > 5000 {
		return usagef("demo --commits %d: give 60 to 5000", o.Commits)
	}
	if o.Machines < 1 || o.Machines > 8 {
		return usagef("demo --machines %d: give 1 to 8", o.Machines)
	}
	model, err := simnoise.Parse(o.Noise)
	if err != nil {
		return usagef("demo --noise %s: %v", o.Noise, err)
	}
	dir, asJSON := o.Dir, o.JSON
	if dir == "" {
		tmp, err := os.MkdirTemp("", "kbisect-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	started := time.Now()
	l, err := simlab.New(dir, simlab.Options{Seed: o.Seed, Commits: o.Commits, Noise: model})
	var other *simlab.OtherLabError
	if errors.As(err, &other) {
		return usagef("demo --dir: %v", err)
	}
	if err != nil {
		return err
	}
	defer l.Close()
	if l.Resumed {
		if len(l.Hosts)+1 != o.Machines {
			return usagef("demo --dir %s: the lab there has %s, not %d: give --machines %d to go on with it, or another --dir", dir, machines(len(l.Hosts)+1), o.Machines, len(l.Hosts)+1)
		}
		fmt.Fprintf(stderr, "kbisect demo: the lab in %s was made before: its hosts are back, and the run goes on from its state\n", dir)
	}
	for len(l.Hosts)+1 < o.Machines { // Hosts are the machines added to the first
		if _, _, err := l.AddHost(); err != nil {
			return err
		}
	}
	t := l.Tree
	l.Describe(stderr, time.Since(started), o.Machines)

	ro := runOptions{Reproduce: o.command(), Line: o.Line, Job: l.JobFile, Jobs: append([]string{l.JobFile}, l.JobFiles...), Goods: []string{t.Good}, Bad: t.Bad, State: filepath.Join(dir, "state"), JSON: asJSON, Verbose: o.Verbose}
	res, err := runJob(ctx, ro, stderr)
	defer res.Close()
	if o.Dir != "" {
		err = resumable(ctx, err, dir, shell.Join(o.Line...))
	}
	runErr := answer(asJSON, res, err, stdout, func() { res.Report.WriteText(ctx, stdout) })
	took := time.Since(started)
	gone := ""
	if o.Dir == "" {
		gone = fmt.Sprintf("kbisect demo: the lab, its state and its reports were in %s, removed now: give --dir DIR to keep them (the same command then resumes or answers again, and kbisect report --state DIR/state renders them)\n", dir)
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "\nkbisect demo: the run did not end with an answer (%.0fs)\n%s", took.Seconds(), gone)
		return runErr
	}
	line, wrong := t.Judge(res.JSON.FirstBad, took)
	fmt.Fprintf(stderr, "\nkbisect demo: %s\n%s", line, gone)
	if wrong {
		return &resultError{exitFailure}
	}
	return nil
}

func machines(n int) string {
	if n == 1 {
		return "1 machine"
	}
	return fmt.Sprintf("%d machines", n)
}
