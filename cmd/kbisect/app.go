package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"kbisect/cmd/kbisect/internal/cliargs"
	"kbisect/internal/usage"
)

// runKbisect is main without the process: tests call it in-process.
func runKbisect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	if len(args) > 1 && args[1] == "help" {
		// "kbisect help run" is "kbisect run --help".
		args = append(append([]string{args[0]}, args[2:]...), "--help")
	}
	if len(args) > 1 && !strings.HasPrefix(args[1], "-") && app.Command(args[1]) == nil {
		return exitCode(ctx, usagef("unknown command %q (kbisect --help lists them)", args[1]), stderr)
	}
	app.Metadata = map[string]any{"args": args}
	err := app.RunContext(ctx, cliargs.FlagsFirst(app, args))
	var reported *reportedError
	var result *resultError
	if err != nil && !errors.As(err, &reported) && !errors.As(err, &result) && wantsJSON(args) {
		// --json promises one object on stdout, also for a mistake in the
		// command line that the flag parser found first.
		// A bisection's object keeps its lists; other commands' carry
		// just what ended them.
		out := map[string]any{"result": "aborted", "error": err.Error()}
		if len(args) > 1 && (args[1] == "run" || args[1] == "demo") {
			out["candidates"], out["tested"] = []string{}, []any{}
		}
		b, _ := json.Marshal(out)
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return exitCode(ctx, err, stderr)
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := commands(stdout, stderr)
	cliargs.Strict(app.Commands, "")
	return app
}

// commands are kbisect's commands as declared, before cliargs.Strict.
func commands(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:  "kbisect",
		Usage: "find the kernel commit that made isolated real-time CPUs noisy",
		UsageText: `kbisect run --job FILE [--job FILE…] --good REV --bad REV [--state DIR] [--find-good] [-v] [--json]
kbisect run --good REV --bad REV --exec CMD [--repo DIR] [--first-parent] [--confidence P] [--state DIR] [--json]
kbisect ab --job FILE (--a REV --b REV | --base REV (--revert SHA | --patch FILE)) [--rounds N] [--samples N] [--state DIR] [--json]
kbisect report --state DIR [--format text|markdown|json|html|junit] [-o FILE]
kbisect nightly --job FILE --remote URL [--branch B] [--tags GLOB] [--db FILE] [--json]
kbisect history --job FILE [--format text|html|json] [--db FILE] [-o FILE]
kbisect demo [--dir DIR] [--seed N] [--commits N] [--machines N] [--noise SETTINGS] [-v] [--json]
kbisect simulate --good V --bad V [--spread S] [--boot-spread S] [--bad-boots R] [--spikes R:A-Bx] [--flips R] [--runs N] [--json]
kbisect validate FILE…
kbisect config show FILE
kbisect parse --tool TOOL FILE [--json]
kbisect measure (--job FILE | --local --tool TOOL --cpus LIST) [--local] [--samples N] [--json]
kbisect host check --job FILE [--json]
kbisect boot --job FILE --artifact DIR
kbisect build --job FILE --rev REV [--json]
kbisect lab image [--dir DIR]`,
		Description:               helpText(kbisectHelp),
		Writer:                    stdout,
		ErrWriter:                 stderr,
		ExitErrHandler:            func(*cli.Context, error) {},
		OnUsageError:              onUsageError,
		HideHelpCommand:           true,
		DisableSliceFlagSeparator: true,
		Commands: []*cli.Command{
			runCommand(),
			nightlyCommand(),
			historyCommand(),
			abCommand(),
			labCommand(),
			reportCommand(),
			validateCommand(),
			configCommand(),
			parseCommand(),
			measureCommand(),
			hostCommand(),
			bootCommand(),
			buildCommand(),
			demoCommand(),
			simulateCommand(),
		},
	}
}

func onUsageError(_ *cli.Context, err error, _ bool) error {
	return usage.Wrap(err)
}

func wantsJSON(args []string) bool {
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		if a == "--json" || a == "-json" || a == "--json=true" {
			return true
		}
	}
	return false
}
