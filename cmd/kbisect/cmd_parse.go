package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"kbisect/noise"
	"kbisect/report"
)

func parseCommand() *cli.Command {
	return &cli.Command{
		Name:        "parse",
		Usage:       "read a noise tool's output and print its per-CPU table",
		ArgsUsage:   "FILE (- for standard input)",
		Description: helpText(parseHelp),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "tool", Usage: "the tool that wrote FILE: " + strings.Join(noise.ParseTools, ", "), Required: true},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object: the per-CPU data and the summary"},
			&cli.BoolFlag{Name: "markdown", Usage: "print the table in markdown"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("parse: name one file (or - for standard input)")
			}
			return runParse(c.String("tool"), c.Args().First(), c.Bool("json"), c.Bool("markdown"), c.App.Reader, c.App.Writer)
		},
	}
}

func runParse(tool, file string, asJSON, markdown bool, stdin io.Reader, stdout io.Writer) error {
	known := false
	for _, t := range noise.ParseTools {
		known = known || t == tool
	}
	if !known {
		return usagef("parse --tool %s: not a tool kbisect parses (%s)", tool, strings.Join(noise.ParseTools, ", "))
	}
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return fmt.Errorf("parse: %v", err)
	}
	m, err := noise.Parse(tool, data)
	if err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	switch {
	case asJSON:
		report.WriteJSON(stdout, report.ParsedJSON{Measurement: m, Summary: noise.Summarize(m)})
		return nil
	case markdown:
		return report.WriteTableMarkdown(stdout, m)
	}
	return report.WriteTable(stdout, m)
}
