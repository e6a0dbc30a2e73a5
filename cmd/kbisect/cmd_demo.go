package main

import (
	"context"
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
		Name:  "demo",
		Usage: "bisect a simulated lab end to end, in well under a minute",
		Description: `demo runs kbisect run --job on a simulated lab and prints what it prints
for a real machine. It is a simulation, and says so: the kernel tree is a
generated kernel-like history (a mainline that merges topic branches) with
one planted noise regression, a few commits that do not build and some
that change only documentation; its "kernel" is a small C program built by
a real make and gcc; the lab machine is an emulated host that speaks SSH,
installs and kexecs the kernels, and answers the osnoise tracer with noise
drawn from a model of the regression report that started kbisect (on the
isolated CPUs of a 64-CPU box, good kernels a few µs of noise per period,
bad ones an interrupt storm of ~49 ms per 950 ms period). Everything
else is kbisect's own code, as on a real lab: the bisection engine, the
builds in slots with their cache, the boot checks, the osnoise parser,
the verdict rule, the state directory, the report.

--noise gives the simulated machines the noise real ones have, as
comma-separated settings (those left out are 0):
   spread=S        the sample-to-sample spread within a boot (a log-normal
                   sigma: 0.2 is about 20 %)
   boot-spread=S   the boot-to-boot spread of the level
   bad-boots=P     the share of boots that measure at the other side's
                   level (a good kernel's boot that looks bad, and the
                   reverse), as 5% or 0.05
   spikes=P:A-Bx   the share of samples multiplied by A to B (an SMI)
   flips=P         the share of samples drawn from the other side's level
Each boot then draws its level from that model and each osnoise
measurement its longest single noise, with no spread of the host's own;
a measurement storms when its side does (a good kernel's bad boot
storms, a spike does not). Without --noise the noise is the seed
report's model alone. A bad boot can fool a verdict made on one boot:
the run then ends not reproduced, or demo says WRONG, as a real lab
would.

At the end demo compares the answer with the planted commit.

EXAMPLES
   kbisect demo
   kbisect demo --seed 7 --commits 2000
   kbisect demo --noise spread=0.2,boot-spread=0.25,spikes=5%:2-20x
   kbisect demo --noise spread=0.2,boot-spread=0.25,bad-boots=5% --seed 2
   kbisect demo --json`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print run's JSON object on stdout"},
			&cli.Int64Flag{Name: "seed", Value: 1, Usage: "which history, regression and noise"},
			&cli.IntFlag{Name: "commits", Value: 400, Usage: "commits in the generated history (60 to 5000)"},
			&cli.StringFlag{Name: "dir", Usage: "keep the lab here (default: a temporary directory, removed after)"},
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
	if err != nil {
		return err
	}
	defer l.Close()
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
	runErr := answer(asJSON, res, err, stdout, func() { res.Report.WriteText(stdout) })
	took := time.Since(started)
	found := res.JSON.FirstBad
	want := t.Expected.FirstBad
	switch {
	case runErr != nil:
		fmt.Fprintf(stderr, "\nkbisect demo: the run did not end with an answer (%.0fs)\n", took.Seconds())
	case want != "" && found == want:
		fmt.Fprintf(stderr, "\nkbisect demo: found the planted regression %s in %.0fs (simulated lab).\n", want[:12], took.Seconds())
	case want == "":
		fmt.Fprintf(stderr, "\nkbisect demo: the planted regression %s sits among commits that do not build: inconclusive is the honest answer (%.0fs).\n", t.Regression[:12], took.Seconds())
	default:
		fmt.Fprintf(stderr, "\nkbisect demo: WRONG: found %q, the planted regression is %s (%.0fs).\n", found, want[:12], took.Seconds())
		if runErr == nil {
			runErr = &resultError{exitFailure}
		}
	}
	return runErr
}
