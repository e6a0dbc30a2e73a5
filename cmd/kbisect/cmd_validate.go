package main

import (
	"io"

	"github.com/urfave/cli/v2"

	"kbisect/configs"
	"kbisect/report"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:         "validate",
		Usage:        "check job files: every error with file:line:col, before a long run finds it",
		ArgsUsage:    "FILE…",
		Description:  helpText(validateHelp),
		Flags:        []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print one JSON object on stdout"}},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return usagef("validate: name at least one job file (kbisect validate configs/*.yaml)")
			}
			return runValidate(c.Args().Slice(), c.Bool("json"), c.App.Writer)
		},
	}
}

func runValidate(files []string, asJSON bool, stdout io.Writer) error {
	out := report.ValidationJSON{OK: true}
	for _, f := range files {
		job, err := configs.Load(f, configs.LoadOptions{AllowDefaults: true})
		c, err := report.CheckOf(f, job, err)
		if err != nil {
			return err
		}
		out.Files, out.OK = append(out.Files, c), out.OK && c.OK
		if !asJSON {
			report.WriteCheck(stdout, c)
		}
	}
	if asJSON {
		report.WriteJSON(stdout, out)
	}
	if !out.OK {
		return &resultError{code: exitUsage}
	}
	return nil
}

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "show a job file as kbisect uses it",
		Subcommands: []*cli.Command{{
			Name:         "show",
			Usage:        "print the effective job: includes merged, defaults filled in, secrets unexpanded",
			ArgsUsage:    "FILE",
			Description:  helpText(configShowHelp),
			OnUsageError: onUsageError,
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return usagef("config show: name one job file")
				}
				job, err := loadJob(c.Args().First(), c.App.ErrWriter)
				if err != nil {
					return err
				}
				out, err := job.Effective()
				if err != nil {
					return err
				}
				_, err = c.App.Writer.Write(out)
				return err
			},
		}},
	}
}

// loadJob loads a job file for a command that goes on to use it.
func loadJob(path string, stderr io.Writer) (*configs.Job, error) { return configs.Open(path, stderr) }
