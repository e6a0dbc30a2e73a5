package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"kbisect/configs"
	"kbisect/internal/atomicfile"
	"kbisect/progress"
	"kbisect/remote"
)

// HostBase is the base command line of the job's test kernels, found at
// this first contact with its host over h: boot.base_cmdline when the
// job gives it, else the host's own kernel's (remote.Host.OwnCmdline:
// never the command line of a test kernel that happens to run).
func HostBase(ctx context.Context, job *configs.Job, h *remote.Host) (remote.Base, error) {
	if b, ok := jobBase(job); ok {
		return b, nil
	}
	return h.OwnCmdline(ctx)
}

// jobBase is the job's boot.base_cmdline as a base, when it gives one.
func jobBase(job *configs.Job) (remote.Base, bool) {
	if job.Boot.BaseCmdline == "" {
		return remote.Base{}, false
	}
	return remote.Base{Cmdline: job.Boot.BaseCmdline, From: remote.BaseFromJob, Host: job.Host.Address, Recorded: time.Now().UTC()}, true
}

// RecordedBase is the base command line recorded in file, where a run's
// state directory keeps it: a resumed run boots from the base it started
// with, whatever kernel its host runs now. Without a record it is found
// at this first contact (HostBase) and recorded; fresh says so. The
// job's boot.base_cmdline, when given, is the base whatever file holds.
func RecordedBase(ctx context.Context, job *configs.Job, file string) (base remote.Base, fresh bool, err error) {
	err = atomicfile.ReadJSON(file, &base)
	switch {
	case err == nil && base.Cmdline != "" && (job.Boot.BaseCmdline == "" || job.Boot.BaseCmdline == base.Cmdline):
		return base, false, nil
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return remote.Base{}, false, fmt.Errorf("the recorded base command line: %w", err)
	}
	base, ok := jobBase(job)
	if !ok {
		h, err := DialHost(ctx, job)
		if err != nil {
			return remote.Base{}, false, err
		}
		defer h.Close()
		if base, err = h.OwnCmdline(ctx); err != nil {
			return remote.Base{}, false, err
		}
	}
	return base, true, atomicfile.WriteJSON(file, base)
}

// baseCmdline is the base command line the pipeline's kernels boot from:
// found once, at the first boot (recorded in BaseFile, or read from it).
func (p *Pipeline) baseCmdline(ctx context.Context) (string, error) {
	if p.base != nil {
		return p.base.Cmdline, nil
	}
	var base remote.Base
	fresh := true
	var err error
	if p.BaseFile != "" {
		base, fresh, err = RecordedBase(ctx, p.Job, p.BaseFile)
	} else if b, ok := jobBase(p.Job); ok {
		base = b
	} else {
		var h *remote.Host
		if h, err = DialHost(ctx, p.Job); err == nil {
			base, err = h.OwnCmdline(ctx)
			h.Close()
		}
	}
	if err != nil {
		return "", fmt.Errorf("the base command line: %w", err)
	}
	if p.Progress != nil {
		how := "recorded"
		if !fresh {
			how = "as recorded before"
		}
		progress.Linef(p.Progress, "%sbase command line %s: %s", p.machine(), how, base)
	}
	p.base = &base
	return base.Cmdline, nil
}

// machine names the pipeline's machine in a line, when a run has several.
func (p *Pipeline) machine() string {
	if p.Name == "" {
		return ""
	}
	return p.Name + ": "
}
