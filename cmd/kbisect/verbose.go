package main

import (
	"context"
	"io"

	"github.com/urfave/cli/v2"

	"kbisect/progress"
)

// verboseFlag is -v: every command as it starts. A new flag per command,
// since tests build apps side by side.
func verboseFlag() cli.Flag {
	return &cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "print every command as it starts, here (+) and on the lab host (+ host:)"}
}

// traceTo prints every command kbisect starts on w, when -v asks.
func traceTo(ctx context.Context, on bool, w io.Writer) context.Context {
	return traceInto(ctx, on, progress.NewGit(w))
}

// traceInto tells a view every command kbisect starts, when -v asks.
func traceInto(ctx context.Context, on bool, sink progress.Sink) context.Context {
	if !on {
		return ctx
	}
	return progress.Trace(ctx, sink)
}
