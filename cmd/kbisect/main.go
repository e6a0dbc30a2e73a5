// Command kbisect finds the kernel commit that made isolated real-time CPUs
// noisy. See `kbisect --help`, and docs/architecture.md for the packages.
//
// This package only parses flags, wires the packages, chooses a terminal
// or CI view of the progress and maps results to exit codes: the use cases
// are run's (run, ab, measure) and nightly's, every rendering is report's.
// Each command's long help is prose in help/<command>.txt.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// Ctrl-C, kill and a dropped ssh session all end the run the same way:
	// the test is stopped and HEAD is put back. A signal the caller ignores
	// (nohup ignores SIGHUP) stays ignored.
	var stops []os.Signal
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP} {
		if !signal.Ignored(sig) {
			stops = append(stops, sig)
		}
	}
	// A closed pipe on stdout or stderr (kbisect … | head) must not kill
	// kbisect half-way: catch SIGPIPE rather than ignore it, so that test
	// commands still get the default action, as under git bisect run.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), stops...)
	code := runKbisect(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
