package report

import (
	"fmt"
	"io"

	"kbisect/kbuild"
	"kbisect/remote"
)

// HostJSON is kbisect host check --json: facts is null when the host was
// not reached (a QEMU job's guest, until a run boots it); wrong and
// problems are lists, empty when all is well; problems are the
// preflight's, each with its fix.
type HostJSON struct {
	Host     string           `json:"host"`
	Facts    *remote.Facts    `json:"facts"`
	OK       bool             `json:"ok"`
	Wrong    []string         `json:"wrong"`
	Problems []remote.Problem `json:"problems"`
	// Base is the base command line a run's test kernels would boot
	// from, as first contact finds it (absent with boot.base_cmdline).
	Base *remote.Base `json:"base,omitempty"`
	// Checked says what a "ready" was checked on: a lab host's SSH,
	// sudo, boot method…, or the files a QEMU guest starts from.
	Checked string `json:"checked"`
}

// WriteHostCheck writes what runs on the host, what of the job's boot
// parameters is not in effect, and whether a run can start there (the
// preflight's problems, each with its fix).
func WriteHostCheck(w io.Writer, c HostJSON) {
	if c.Facts == nil {
		fmt.Fprintf(w, "host:       %s (not reached)\n", c.Host)
	} else {
		facts := *c.Facts
		fmt.Fprintf(w, "host:       %s (host key verified)\n", c.Host)
		fmt.Fprintf(w, "kernel:     %s\n", facts.Release)
		fmt.Fprintf(w, "version:    %s\n", facts.Version)
		fmt.Fprintf(w, "boot id:    %s\n", facts.BootID)
		fmt.Fprintf(w, "cmdline:    %s\n", facts.Cmdline)
		writeIsolation(w, facts)
		fmt.Fprintf(w, "PREEMPT_RT: %v\n", facts.PreemptRT)
		if c.Base != nil {
			fmt.Fprintf(w, "base:       %s\n", c.Base)
		}
		if len(c.Wrong) == 0 {
			fmt.Fprintln(w, "ok: the job's boot parameters are in effect")
		}
		for _, b := range c.Wrong {
			fmt.Fprintf(w, "wrong: %s\n", b)
		}
	}
	if len(c.Problems) == 0 {
		fmt.Fprintf(w, "ready: a run can start (%s)\n", c.Checked)
	}
	for _, p := range c.Problems {
		fmt.Fprintf(w, "not ready: %s\n  fix: %s\n", p.What, p.Fix)
	}
}

// WriteBooted writes what kbisect boot proved runs.
func WriteBooted(w io.Writer, facts remote.Facts) {
	fmt.Fprintf(w, "running:    %s (%s)\n", facts.Release, facts.Version)
	fmt.Fprintf(w, "boot id:    %s\n", facts.BootID)
	fmt.Fprintf(w, "cmdline:    %s\n", facts.Cmdline)
	writeIsolation(w, facts)
	fmt.Fprintf(w, "ok: %s runs with the job's boot parameters\n", facts.Release)
}

func writeIsolation(w io.Writer, facts remote.Facts) {
	fmt.Fprintf(w, "isolated:   %s\n", orNone(facts.Isolated))
	fmt.Fprintf(w, "nohz_full:  %s\n", orNone(facts.NohzFull))
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// WriteArtifact writes where a built kernel is and how it was made.
func WriteArtifact(w io.Writer, a *kbuild.Artifact) {
	from := fmt.Sprintf("built in %.1fs", a.Took.Seconds())
	if a.Cached {
		from = fmt.Sprintf("from the cache in %.1fs", a.Took.Seconds())
	}
	fmt.Fprintf(w, "artifact:  %s\nrelease:   %s\nsignature: %s\n%s (ccache: %v)\n", a.Dir, a.Release, a.Signature, from, a.CCache)
}
