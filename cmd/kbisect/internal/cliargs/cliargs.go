// Package cliargs makes urfave/cli read a command line as users write it:
// flags anywhere, a mistake answered in one line (exit 2, through
// internal/usage) rather than a help page, a flag's default said once.
// It knows no kbisect command.
package cliargs

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"kbisect/internal/usage"
)

// FlagsFirst moves a command's flags before its arguments: users write
// `kbisect parse FILE --tool oslat`, and urfave/cli stops reading flags
// at the first argument. A flag's value goes with it; after "--"
// everything is an argument, as written.
func FlagsFirst(app *cli.App, args []string) []string {
	i, cmds := 1, app.Commands
	var cmd *cli.Command
	for i < len(args) {
		c := FindCommand(cmds, args[i])
		if c == nil {
			break
		}
		cmd, cmds = c, c.Subcommands
		i++
	}
	if cmd == nil || len(cmd.Subcommands) > 0 {
		return args
	}
	var flags, rest []string
	for j := i; j < len(args); j++ {
		a := args[j]
		switch {
		case a == "--":
			rest = append(rest, args[j:]...)
			j = len(args)
		case strings.HasPrefix(a, "-") && a != "-":
			flags = append(flags, a)
			name, _, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !inline && takesValue(cmd, name) && j+1 < len(args) {
				flags = append(flags, args[j+1])
				j++
			}
		default:
			rest = append(rest, a)
		}
	}
	return slices.Concat(args[:i], flags, rest)
}

func FindCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name || slices.Contains(c.Aliases, name) {
			return c
		}
	}
	return nil
}

// takesValue says whether the command's flag name is followed by a value.
func takesValue(cmd *cli.Command, name string) bool {
	for _, f := range cmd.Flags {
		if !slices.Contains(f.Names(), name) {
			continue
		}
		_, isBool := f.(*cli.BoolFlag)
		return !isBool
	}
	return false // --help, or unknown: the parser says so
}

// Strict makes every command answer a mistake in its command line as
// one: exit 2 and one line that says what is wrong and where the help
// is, not a help page. Required flags are checked here (urfave/cli
// prints the whole help before its error), and a command that takes no
// arguments refuses one.
func Strict(cmds []*cli.Command, parent string) {
	for _, c := range cmds {
		path := strings.TrimSpace(parent + " " + c.Name)
		Strict(c.Subcommands, path)
		if c.Action == nil {
			continue
		}
		var required []string
		for _, f := range c.Flags {
			if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() && setNotRequired(f) {
				required = append(required, f.Names()[0])
			}
		}
		action, takesArgs := c.Action, c.ArgsUsage != "" || c.Name == "run" || c.Name == "ab"
		c.Action = func(ctx *cli.Context) error {
			for _, name := range required {
				if !ctx.IsSet(name) {
					return usage.Errorf("%s: --%s is required (see kbisect %s --help)", path, name, path)
				}
			}
			if !takesArgs && ctx.NArg() > 0 {
				return usage.Errorf("%s: unexpected argument %q: it takes only flags (see kbisect %s --help)", path, ctx.Args().First(), path)
			}
			return action(ctx)
		}
		c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
			return usage.Errorf("%s: %v (see kbisect %s --help)", path, err, path)
		}
	}
}

// setNotRequired drops a flag's Required, for Strict to check it, and
// says whether it could (a kind of flag not named here stays urfave's).
func setNotRequired(f cli.Flag) bool {
	switch f := f.(type) {
	case *cli.StringFlag:
		f.Required = false
	case *cli.StringSliceFlag:
		f.Required = false
	case *cli.IntFlag:
		f.Required = false
	default:
		return false
	}
	return true
}

// A flag's help says its default once: urfave/cli appends "(default: …)"
// to every flag, also to a switch that is off, to a number whose zero
// means "as the job says", and after a usage that already names the
// default.
func init() {
	plain := cli.FlagStringer
	cli.FlagStringer = func(f cli.Flag) string {
		s := plain(f)
		usage := ""
		if d, ok := f.(cli.DocGenerationFlag); ok {
			usage = d.GetUsage()
		}
		i := strings.LastIndex(s, " (default: ")
		if i < 0 || strings.HasSuffix(s, usage) {
			return s // nothing appended
		}
		if def := s[i:]; strings.Contains(usage, "(default") || def == " (default: false)" || def == " (default: 0)" {
			return s[:i]
		}
		return s
	}
}
