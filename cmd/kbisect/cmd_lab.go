package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"kbisect/configs"
	"kbisect/qemu"
)

func labCommand() *cli.Command {
	return &cli.Command{
		Name:  "lab",
		Usage: "the local QEMU lab: its guest image",
		Subcommands: []*cli.Command{{
			Name:        "image",
			Usage:       "build the QEMU lab's guest root file system once (debootstrap; needs root and Debian's mirror)",
			Description: helpText(labImageHelp),
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "dir", Value: qemu.DefaultImageDir(), Usage: "where the image and its keys go"},
				&cli.StringFlag{Name: "suite", Value: "bookworm", Usage: "the Debian release"},
				&cli.StringFlag{Name: "mirror", Usage: "the Debian mirror (default: debootstrap's)"},
				&cli.StringFlag{Name: "size", Value: "2GiB", Usage: "the image's size"},
			},
			OnUsageError: onUsageError,
			Action: func(c *cli.Context) error {
				return runLabImage(c.Context, c.String("dir"), c.String("suite"), c.String("mirror"), c.String("size"), c.App.ErrWriter)
			},
		}},
	}
}

func runLabImage(ctx context.Context, dir, suite, mirror, size string, stderr io.Writer) error {
	bytes, err := configs.ParseSize(size)
	if err != nil || bytes < 1<<20 {
		return usagef("lab image --size %q: give it in MiB or GiB (2GiB)", size)
	}
	start := time.Now()
	if err := qemu.BuildImage(ctx, dir, suite, mirror, int64(bytes), stderr); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "kbisect lab image: %s ready in %.0fs\n", qemu.Image{Dir: dir}.RootFS(), time.Since(start).Seconds())
	return nil
}
