package report

import (
	"errors"
	"fmt"
	"io"

	"kbisect/configs"
)

// FileCheck is one job file as kbisect validate found it: its errors and
// warnings, each with file:line:col.
type FileCheck struct {
	File     string     `json:"file"`
	OK       bool       `json:"ok"`
	Errors   []DiagJSON `json:"errors"`
	Warnings []DiagJSON `json:"warnings"`
	all      []configs.Diagnostic
	defaults bool // a file of defaults that job files include
}

// DiagJSON is one problem of a job file.
type DiagJSON struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Col     int    `json:"col,omitempty"`
	Key     string `json:"key,omitempty"`
	Message string `json:"message"`
}

// CheckOf is what loading file said: job and err as configs.Load returned
// them. An error that is not the job file's is returned as it is.
func CheckOf(file string, job *configs.Job, err error) (FileCheck, error) {
	c := FileCheck{File: file, OK: true}
	var errs, warns []configs.Diagnostic
	var ce *configs.Errors
	switch {
	case errors.As(err, &ce):
		c.OK = false
		errs, warns, c.all = ce.List, ce.Warnings, ce.All
	case err != nil:
		return c, err
	default:
		warns, c.all, c.defaults = job.Warnings, job.Warnings, job.Kind == configs.KindDefaults
	}
	c.Errors, c.Warnings = diags(errs), diags(warns)
	return c, nil
}

func diags(ds []configs.Diagnostic) []DiagJSON {
	out := []DiagJSON{}
	for _, d := range ds {
		out = append(out, DiagJSON{d.Pos.File, d.Pos.Line, d.Pos.Col, d.Key, d.Msg})
	}
	return out
}

// WriteCheck writes a file's problems, one a line, and its verdict.
func WriteCheck(w io.Writer, c FileCheck) {
	for _, d := range c.all {
		fmt.Fprintln(w, d)
	}
	switch {
	case !c.OK:
		fmt.Fprintf(w, "%s: %s\n", c.File, Count(len(c.Errors), "error"))
	case c.defaults:
		fmt.Fprintf(w, "%s: ok (defaults for the job files that include it)\n", c.File)
	case len(c.Warnings) > 0:
		fmt.Fprintf(w, "%s: ok (%s)\n", c.File, Count(len(c.Warnings), "warning"))
	default:
		fmt.Fprintf(w, "%s: ok\n", c.File)
	}
}

// ValidationJSON is kbisect validate --json (its keys in the order they
// have always come: files, then ok).
type ValidationJSON struct {
	Files []FileCheck `json:"files"`
	OK    bool        `json:"ok"`
}

// Count writes "1 error", "3 errors".
func Count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
