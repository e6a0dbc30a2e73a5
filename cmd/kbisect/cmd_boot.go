package main

import (
	"context"
	"io"
	"kbisect/report"
	"kbisect/run"

	"github.com/urfave/cli/v2"
)

func bootCommand() *cli.Command {
	return &cli.Command{
		Name:  "boot",
		Usage: "install a built kernel on the job's host, boot it, and prove it runs as the job needs",
		Description: `boot copies the artifact to the job's lab host (every file's checksum
verified), installs it as /boot/vmlinuz-<release> and /lib/modules/<release>
with the job's initramfs step, boots it (kexec, a grub one-shot entry, or
the job's script) with the job's boot parameters, waits for the new boot
id, and verifies the release, the command line, the isolated and nohz_full
CPUs and PREEMPT_RT. A kernel that does not come back is power-cycled away
(boot.power_cycle) and reported as a kernel failure with what the console
said; a kernel that runs but not as asked is a lab failure. Both exit 1.

An artifact directory holds kernel.release, bzImage (or vmlinuz, Image) and
optionally modules.tar (what kbisect build makes) or a modules/ tree: what
goes into /lib/modules/<release>.

EXAMPLES
   kbisect boot --job configs/system-0.yaml --artifact ~/.cache/kbisect/6.12.78-rt`,
		Flags: []cli.Flag{
			verboseFlag(),
			&cli.StringFlag{Name: "job", Required: true, Usage: "job file of the lab machine"},
			&cli.StringFlag{Name: "artifact", Required: true, Usage: "directory of the built kernel"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			return runBoot(traceTo(c.Context, c.Bool("verbose"), c.App.ErrWriter), c.String("job"), c.String("artifact"), c.App.Writer, c.App.ErrWriter)
		},
	}
}

func runBoot(ctx context.Context, jobFile, artifact string, stdout, stderr io.Writer) error {
	facts, err := run.Boot(ctx, jobFile, artifact, stderr)
	if err != nil {
		return err
	}
	report.WriteBooted(stdout, facts)
	return nil
}
