package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"kbisect/configs"
	"kbisect/internal/usage"
	"kbisect/kbuild"
	"kbisect/lab"
	"kbisect/remote"
)

// HostCheck is what kbisect host check found: the host as reached (its
// key verified), what its running kernel says of itself, what of the
// job's boot parameters is not in effect, and what the preflight of a run
// finds wrong, each with its fix.
type HostCheck struct {
	Host string
	// Facts are the running kernel's (nil: the host was not reached).
	Facts    *remote.Facts
	Wrong    []string
	Problems []remote.Problem
	// Base is the base command line the test kernels would boot from.
	Base *remote.Base
	// Checked says what was checked: a lab host's SSH, sudo and so on,
	// or the files and programs a QEMU guest starts from.
	Checked string
}

// CheckHost reaches the job's host and compares what runs there with the
// job's boot parameters, and runs the preflight a run starts with: the
// same checks, the same words. It never takes more than two minutes.
func CheckHost(ctx context.Context, jobFile string, messages io.Writer) (*HostCheck, error) {
	job, err := configs.Open(jobFile, messages)
	if err != nil {
		return nil, err
	}
	if _, err := lab.HostOptions(job); err != nil && job.Boot.Method != configs.BootQEMU {
		return nil, usage.Errorf("host check: %v", err)
	}
	rd, err := lab.Preflight(ctx, job, lab.PreflightOptions{})
	if err != nil {
		return nil, fmt.Errorf("host check: %w", err)
	}
	c := &HostCheck{Host: rd.Host, Facts: rd.Facts, Wrong: []string{}, Problems: append([]remote.Problem{}, rd.Problems...), Base: rd.Base, Checked: rd.Checked}
	if rd.Facts != nil {
		c.Wrong = append([]string{}, rd.Facts.Check(lab.Expect(job, ""))...)
	}
	return c, nil
}

// Boot installs and boots a built kernel on the job's host, and proves
// that it runs with the job's boot parameters (kbisect boot). A kernel
// that fails says so with its console's tail on messages.
func Boot(ctx context.Context, jobFile, artifact string, messages io.Writer) (remote.Facts, error) {
	job, err := configs.Open(jobFile, messages)
	if err != nil {
		return remote.Facts{}, err
	}
	if _, err := lab.HostOptions(job); err != nil {
		return remote.Facts{}, usage.Errorf("boot: %v", err)
	}
	art, err := remote.LoadArtifact(artifact)
	if err != nil {
		return remote.Facts{}, usage.Errorf("boot --artifact: %v", err)
	}
	// One kbisect built is checked against its build's sums: a damaged
	// kernel would boot as a failure that is not the commit's.
	if _, err := os.Stat(filepath.Join(artifact, "meta.json")); err == nil {
		if err := kbuild.Check(artifact); err != nil {
			return remote.Facts{}, fmt.Errorf("boot --artifact: %w (kbisect build builds it again)", err)
		}
	}
	if err := job.CheckEnv(nil); err != nil {
		return remote.Facts{}, usage.Errorf("boot: %v", err)
	}
	// The first contact: no state keeps a base between two boots, and
	// the host may run the test kernel of another job, so the base is
	// the job's or the host's own kernel's, never the running one's.
	h, err := lab.DialHost(ctx, job)
	if err != nil {
		return remote.Facts{}, fmt.Errorf("boot: %w", err)
	}
	base, err := lab.HostBase(ctx, job, h)
	h.Close()
	if err != nil {
		return remote.Facts{}, fmt.Errorf("boot: %w", err)
	}
	fmt.Fprintf(messages, "base command line: %s\n", base)
	fmt.Fprintf(messages, "installing and booting %s on %s (%s)\n", art.Release, job.Host.Address, job.Boot.Method)
	h, facts, err := lab.BootArtifact(ctx, job, art, base.Cmdline, nil)
	var ke *remote.KernelError
	if errors.As(err, &ke) {
		if ke.Console != "" {
			fmt.Fprintf(messages, "console:\n%s\n", ke.Console)
		}
		return remote.Facts{}, fmt.Errorf("boot: kernel failure: %w", err)
	}
	if err != nil {
		return remote.Facts{}, fmt.Errorf("boot: %w", err)
	}
	h.Close()
	return facts, nil
}

// Build builds the kernel of one revision in a build slot, or takes it
// from the cache (kbisect build); make's output goes to logTo ("-": to
// messages), by default to a log in the cache directory, named on
// messages.
func Build(ctx context.Context, jobFile, rev, logTo string, slot int, messages io.Writer) (*kbuild.Artifact, error) {
	job, err := configs.Open(jobFile, messages)
	if err != nil {
		return nil, err
	}
	commit, err := lab.ResolveCommit(ctx, job, rev)
	if err != nil {
		return nil, usage.Errorf("build --rev: %v", err)
	}
	if logTo == "" {
		logDir := filepath.Join(string(job.Build.CacheDir), "logs")
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			return nil, err
		}
		logTo = filepath.Join(logDir, "build-"+commit[:12]+".log")
	}
	var log io.Writer = messages
	if logTo != "-" {
		f, err := os.OpenFile(logTo, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644) // a cache hit must not wipe the build's log
		if err != nil {
			return nil, err
		}
		defer f.Close()
		log = f
	}
	fmt.Fprintf(messages, "building %s (%s) in slot %d; make's output: %s\n", rev, commit[:12], slot, logTo)
	opt := lab.BuildOptions(job, log)
	if opt.Base, err = lab.BaseConfig(ctx, job, messages); err != nil {
		return nil, err
	}
	// Another kbisect in this slot (a second controller on the same
	// build server): the next free one, not a failure.
	opt.SpareSlots = configs.MaxBuildSlots
	a, err := kbuild.Build(ctx, opt, slot, commit)
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", rev, err)
	}
	return a, nil
}

// BuildFailure is a failed Build's JSON answer: the typed failure a
// controller that ran it on a build server turns back into its error.
func BuildFailure(err error) kbuild.Failure { return kbuild.FailureOf(err) }
