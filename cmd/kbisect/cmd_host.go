package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"kbisect/lab"
	"kbisect/remote"
)

func hostCommand() *cli.Command {
	return &cli.Command{
		Name:  "host",
		Usage: "the lab machine of a job",
		Subcommands: []*cli.Command{{
			Name:  "check",
			Usage: "connect to the job's host and say whether its kernel runs as the job needs",
			Description: `check connects to the job's host over SSH (verifying its host key against
known_hosts), prints the running kernel's release, boot id, command line,
isolated and nohz_full CPUs and whether PREEMPT_RT is active, and checks
that every boot parameter of the job is in effect. It exits 0 only when
all is well: run it before leaving a bisection alone for the night.

EXAMPLES
   kbisect host check --job configs/system-0.yaml`,
			Flags: []cli.Flag{
				verboseFlag(),
				&cli.StringFlag{Name: "job", Required: true, Usage: "job file of the lab machine"},
				&cli.BoolFlag{Name: "json", Usage: "print one JSON object on stdout"},
			},
			OnUsageError: onUsageError,
			Action: func(c *cli.Context) error {
				return runHostCheck(traceTo(c.Context, c.Bool("verbose"), c.App.ErrWriter), c.String("job"), c.Bool("json"), c.App.Writer, c.App.ErrWriter)
			},
		}},
	}
}

func runHostCheck(ctx context.Context, jobFile string, asJSON bool, stdout, stderr io.Writer) error {
	job, err := loadJob(jobFile, stderr)
	if err != nil {
		return err
	}
	if _, err := lab.HostOptions(job); err != nil {
		return usagef("host check: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute) // a check never hangs
	defer cancel()
	h, err := lab.DialHost(ctx, job)
	if err != nil {
		return fmt.Errorf("host check: %w", err)
	}
	defer h.Close()
	facts, err := h.Facts(ctx)
	if err != nil {
		return fmt.Errorf("host check: %w", err)
	}
	bad := facts.Check(lab.Expect(job, ""))
	if asJSON {
		b, err := json.MarshalIndent(struct {
			Host  string       `json:"host"`
			Facts remote.Facts `json:"facts"`
			OK    bool         `json:"ok"`
			Wrong []string     `json:"wrong"`
		}{h.Name(), facts, len(bad) == 0, append([]string{}, bad...)}, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprintf(stdout, "host:       %s (host key verified)\n", h.Name())
		fmt.Fprintf(stdout, "kernel:     %s\n", facts.Release)
		fmt.Fprintf(stdout, "version:    %s\n", facts.Version)
		fmt.Fprintf(stdout, "boot id:    %s\n", facts.BootID)
		fmt.Fprintf(stdout, "cmdline:    %s\n", facts.Cmdline)
		fmt.Fprintf(stdout, "isolated:   %s\n", orNone(facts.Isolated))
		fmt.Fprintf(stdout, "nohz_full:  %s\n", orNone(facts.NohzFull))
		fmt.Fprintf(stdout, "PREEMPT_RT: %v\n", facts.PreemptRT)
		if len(bad) == 0 {
			fmt.Fprintln(stdout, "ok: the job's boot parameters are in effect")
		}
		for _, b := range bad {
			fmt.Fprintf(stdout, "wrong: %s\n", b)
		}
	}
	if len(bad) > 0 {
		return &resultError{code: exitFailure}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
