package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"kbisect/internal/shell"
)

// verboseFlag is -v: every command as it starts. A new flag per command,
// since tests build apps side by side.
func verboseFlag() cli.Flag {
	return &cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "print every command as it starts, here (+) and on the lab host (+ host:)"}
}

// traceCommands returns ctx with a tracer that prints each command kbisect
// starts, as sh -x does: "+ cmd" here, "+ user@host: cmd" on a host, the
// further lines of a script indented under it. print gets whole lines and
// is called from one goroutine at a time.
func traceCommands(ctx context.Context, on bool, print func(string)) context.Context {
	if !on {
		return ctx
	}
	var mu sync.Mutex
	return shell.WithTracer(ctx, func(where, command string) {
		text := formatCommand(where, command)
		mu.Lock()
		defer mu.Unlock()
		print(text)
	})
}

// traceTo prints the commands to w.
func traceTo(ctx context.Context, on bool, w io.Writer) context.Context {
	return traceCommands(ctx, on, func(s string) { fmt.Fprintln(w, s) })
}

// formatCommand is one traced command: blank lines dropped, the first line
// after the prefix, the others indented.
func formatCommand(where, command string) string {
	prefix := "+ "
	if where != "" {
		prefix += where + ": "
	}
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(command), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if b.Len() == 0 {
			b.WriteString(prefix + l)
			continue
		}
		b.WriteString("\n    " + l)
	}
	return b.String()
}
