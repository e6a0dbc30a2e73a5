// Command kbisect finds the kernel commit that made isolated real-time CPUs
// noisy. See `kbisect --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// Ctrl-C, kill and a dropped ssh session all end the run the same way:
	// the test is stopped and HEAD is put back. A closed pipe on stdout or
	// stderr (kbisect … | head) must not kill the process half-way either.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
