package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "bisect a simulated lab end to end (arrives with kbisect run --job)",
		Description: `demo will run a whole bisection on a simulated lab: a generated kernel
history, simulated builds and boots, and noise measurements drawn from real
osnoise outputs, ending in the tables kbisect prints for a real machine.

The simulated lab arrives with "kbisect run --job". Until then demo says so
and exits 0, so scripts that call it keep working.

EXAMPLES
   kbisect demo
   kbisect demo --json`,
		Flags:        []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print one JSON object on stdout"}},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.Bool("json") {
				fmt.Fprintln(c.App.Writer, `{"result": "unavailable", "reason": "the simulated lab arrives with kbisect run --job"}`)
				return nil
			}
			fmt.Fprintln(c.App.Writer, "kbisect demo: the simulated lab arrives with \"kbisect run --job\".")
			fmt.Fprintln(c.App.Writer, "Until then, try the git-bisect-run mode on any repository:")
			fmt.Fprintln(c.App.Writer, "  kbisect run --repo DIR --good REV --bad REV --exec CMD")
			return nil
		},
	}
}
