package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"kbisect/configs"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check job files: every error with file:line:col, before a long run finds it",
		ArgsUsage: "FILE…",
		Description: `validate loads each job file as kbisect run would (includes, defaults,
strict keys, CPU lists against the machine and the boot parameters, files
that must exist) and prints "FILE: ok", or every problem found, each with
its file:line:col. Warnings (a measured CPU that is not isolated, a
${SECRET} not set here) do not fail a file.

EXIT STATUS
   0 every file is valid, 2 any file has an error.

EXAMPLES
   kbisect validate configs/*.yaml
   kbisect validate --json configs/system-0.yaml`,
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

// fileReport is one file's result in validate --json.
type fileReport struct {
	File     string       `json:"file"`
	OK       bool         `json:"ok"`
	Errors   []diagReport `json:"errors"`
	Warnings []diagReport `json:"warnings"`
}

type diagReport struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Col     int    `json:"col,omitempty"`
	Key     string `json:"key,omitempty"`
	Message string `json:"message"`
}

func diagReports(ds []configs.Diagnostic) []diagReport {
	out := []diagReport{}
	for _, d := range ds {
		out = append(out, diagReport{d.Pos.File, d.Pos.Line, d.Pos.Col, d.Key, d.Msg})
	}
	return out
}

func runValidate(files []string, asJSON bool, stdout io.Writer) error {
	var reports []fileReport
	failed := 0
	for _, f := range files {
		r := fileReport{File: f, OK: true}
		var errs, warns, all []configs.Diagnostic
		job, err := configs.Load(f, configs.LoadOptions{AllowDefaults: true})
		var ce *configs.Errors
		switch {
		case errors.As(err, &ce):
			r.OK = false
			errs, warns, all = ce.List, ce.Warnings, ce.All
		case err != nil:
			return err
		default:
			warns, all = job.Warnings, job.Warnings
		}
		r.Errors, r.Warnings = diagReports(errs), diagReports(warns)
		reports = append(reports, r)
		if !r.OK {
			failed++
		}
		if asJSON {
			continue
		}
		for _, d := range all {
			fmt.Fprintln(stdout, d)
		}
		switch {
		case !r.OK:
			fmt.Fprintf(stdout, "%s: %s\n", f, count(len(errs), "error"))
		case job.Kind == configs.KindDefaults:
			fmt.Fprintf(stdout, "%s: ok (defaults for the job files that include it)\n", f)
		case len(warns) > 0:
			fmt.Fprintf(stdout, "%s: ok (%s)\n", f, count(len(warns), "warning"))
		default:
			fmt.Fprintf(stdout, "%s: ok\n", f)
		}
	}
	if asJSON {
		b, err := json.MarshalIndent(map[string]any{"ok": failed == 0, "files": reports}, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", b)
	}
	if failed > 0 {
		return &resultError{code: exitUsage}
	}
	return nil
}

// count writes "1 error", "3 errors".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "show a job file as kbisect uses it",
		Subcommands: []*cli.Command{{
			Name:      "show",
			Usage:     "print the effective job: includes merged, defaults filled in, secrets unexpanded",
			ArgsUsage: "FILE",
			Description: `show prints the job as kbisect runs it, in YAML: the included files
merged under the machine's file, every default filled in, and a comment
on each value that came from an include or a default. Commands print as
written, so ${BMC_PASSWORD} stays a name and never becomes its value.

EXAMPLES
   kbisect config show configs/system-0.yaml`,
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
