package progress

import (
	"context"
	"strings"

	"kbisect/internal/shell"
)

// Trace returns ctx with a tracer that tells sink, as Command events,
// each command kbisect starts, as sh -x shows it: "+ cmd" here, "+
// user@host: cmd" on a host, the further lines of a script indented.
func Trace(ctx context.Context, sink Sink) context.Context {
	return shell.WithTracer(ctx, func(where, command string) {
		sink.Emit(Event{Kind: Command, Text: CommandText(where, command)})
	})
}

// CommandText is one traced command: blank lines dropped, the first line
// after the prefix, the others indented.
func CommandText(where, command string) string {
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
