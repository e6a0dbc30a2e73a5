package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"kbisect/cmd/kbisect/internal/cliargs"
)

// helpCommands are every command's help: the top level's and each
// command's and subcommand's, with the words that call it.
func helpCommands(app *cli.App) map[string]string {
	out := map[string]string{"": indent(app.UsageText) + "\n" + app.Description}
	var walk func(cmds []*cli.Command, parent string)
	walk = func(cmds []*cli.Command, parent string) {
		for _, c := range cmds {
			path := strings.TrimSpace(parent + " " + c.Name)
			out[path] = indent(c.UsageText) + "\n" + c.Description
			walk(c.Subcommands, path)
		}
	}
	walk(app.Commands, "")
	return out
}

// indent indents every line of a usage text, where each line is one.
func indent(s string) string {
	if s == "" {
		return ""
	}
	return "   " + strings.ReplaceAll(s, "\n", "\n   ")
}

// exampleLines are the command lines of a help text: indented "kbisect …"
// lines (prose is not indented), backslash continuations joined, up to a
// shell operator.
func exampleLines(text string) []string {
	var out []string
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "kbisect ") || !strings.HasPrefix(lines[i], " ") {
			continue
		}
		for strings.HasSuffix(l, "\\") && i+1 < len(lines) {
			i++
			l = strings.TrimSuffix(l, "\\") + " " + strings.TrimSpace(lines[i])
		}
		out = append(out, l)
	}
	return out
}

// shellWords splits a command line as sh does for the quoting help uses:
// '…' and "…", no expansion.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '#' && !in, (c == '>' || c == '|' || c == ';' || c == '&') && !in:
			return words // a comment, or what the shell does with it
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// TestEveryExampleInTheHelpParses: each "kbisect …" line in a help text
// is a command line kbisect accepts: its command exists, its flags are
// the command's with their values, nothing required is missing and no
// argument is left over. Lines with a grammar ([…], (a | b), …) are
// checked for their flags' names only.
func TestEveryExampleInTheHelpParses(t *testing.T) {
	checked := 0
	for cmdPath, text := range helpCommands(newApp(io.Discard, io.Discard)) {
		for _, line := range exampleLines(text) {
			if strings.Contains(line, "|") && !strings.Contains(line, "'") || strings.ContainsAny(line, "[]…") || strings.Contains(line, " (") {
				checkFlagNames(t, cmdPath, line)
				continue
			}
			words := shellWords(line)
			// Each command's work is replaced by a note that it ran: what
			// is checked is the command line, as strict and the parser
			// check it.
			app := commands(io.Discard, io.Discard)
			ran := ""
			var stub func([]*cli.Command, string)
			stub = func(cmds []*cli.Command, parent string) {
				for _, c := range cmds {
					path := strings.TrimSpace(parent + " " + c.Name)
					if c.Action != nil {
						c.Action = func(*cli.Context) error { ran = path; return nil }
					}
					stub(c.Subcommands, path)
				}
			}
			stub(app.Commands, "")
			cliargs.Strict(app.Commands, "")
			err := app.RunContext(context.Background(), cliargs.FlagsFirst(app, words))
			if err != nil || ran == "" {
				t.Errorf("help of %q: %s\n  %v (ran %q)", cmdPath, line, err, ran)
			}
			checked++
		}
	}
	if checked < 20 {
		t.Errorf("only %d example lines checked", checked)
	}
}

func checkFlagNames(t *testing.T, cmdPath, line string) {
	t.Helper()
	words := strings.FieldsFunc(line, func(r rune) bool { return strings.ContainsRune(" []()|…", r) })
	app := newApp(io.Discard, io.Discard)
	var cmd *cli.Command
	cmds := app.Commands
	for _, w := range words[1:] {
		c := cliargs.FindCommand(cmds, w)
		if c == nil {
			break
		}
		cmd, cmds = c, c.Subcommands
	}
	if cmd == nil {
		t.Errorf("help of %q: %s: no such command", cmdPath, line)
		return
	}
	for _, w := range words {
		if !strings.HasPrefix(w, "-") || w == "-" {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
		found := name == "help" || name == "h"
		for _, f := range cmd.Flags {
			for _, n := range f.Names() {
				found = found || n == name
			}
		}
		if !found {
			t.Errorf("help of %q: %s: %s has no flag %s", cmdPath, line, cmd.Name, w)
		}
	}
}
