package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"kbisect/internal/simlab"
	"kbisect/internal/simnoise"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:        "demo",
		Usage:       "bisect a simulated lab end to end, in well under a minute",
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
				Noise: c.String("noise"), JSON: c.Bool("json"), Verbose: c.Bool("verbose")}
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

	ro := runOptions{Job: l.JobFile, Jobs: append([]string{l.JobFile}, l.JobFiles...), Goods: []string{t.Good}, Bad: t.Bad, State: filepath.Join(dir, "state"), JSON: asJSON, Verbose: o.Verbose}
	res, err := runJob(ctx, ro, stderr)
	defer res.Close()
	runErr := answer(asJSON, res, err, stdout, func() { res.Report.WriteText(ctx, stdout) })
	took := time.Since(started)
	if runErr != nil {
		fmt.Fprintf(stderr, "\nkbisect demo: the run did not end with an answer (%.0fs)\n", took.Seconds())
		return runErr
	}
	line, wrong := t.Judge(res.JSON.FirstBad, took)
	fmt.Fprintf(stderr, "\nkbisect demo: %s\n", line)
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
