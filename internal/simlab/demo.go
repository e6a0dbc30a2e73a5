package simlab

import (
	"fmt"
	"io"
	"strings"
	"time"

	"kbisect/internal/simnoise"
)

// Describe says what the lab is, for kbisect demo: a simulation, made in
// made, with machines identical machines.
func (l *Lab) Describe(w io.Writer, made time.Duration, machines int) {
	t := l.Tree
	modelled := ""
	if l.opt.Noise != (simnoise.Model{}) {
		modelled = fmt.Sprintf("  noise:   as real machines have it, %s:\n"+
			"           each boot draws its level (a bad boot the other side's), each sample\n"+
			"           scatters around it\n", l.opt.Noise)
	}
	after := fmt.Sprintf("an interrupt storm of ~%v interruptions, ~49ms per 950ms period", t.BadNoise)
	if l.opt.NoStorm {
		after = fmt.Sprintf("interruptions of ~%v, no storm (the longest single noise tells)", t.BadNoise)
	}
	fmt.Fprintf(w, `kbisect demo: a SIMULATED lab (made in %.1fs, in %s)
  tree:    %d generated commits, %s..%s; planted regression %s %q;
           %d commits that do not build, %d that change only documentation
  kernel:  a small C program built by make and gcc, as kbisect builds a kernel
  host:    an emulated 64-CPU PREEMPT_RT machine over SSH on 127.0.0.1:%d
           (%s), answering osnoise with noise modelled on the seed report:
           on the isolated CPUs, interruptions of ~%v before the regression;
           after it %s
%s  job:     %s

`, made.Seconds(), l.Dir, len(t.Commits), t.Good, t.Bad, t.Regression[:12], t.Subject(t.Regression),
		len(t.Broken), len(t.DocOnly), l.Host.Port, BootParams, t.GoodNoise, after, modelled,
		strings.Join(append([]string{l.JobFile}, l.JobFiles...), " "))
	if machines > 1 {
		fmt.Fprintf(w, "  %d machines, one posterior: each boots both endpoints for its own level, then\n"+
			"  each free machine boots what tells the most beside what the others measure\n\n", machines)
	}
}

// Judge is kbisect demo's last word on a run that ended with an answer:
// whether found, the first bad commit it named ("" for none), is the
// regression the tree planted, after took; wrong says it is not.
func (t *Tree) Judge(found string, took time.Duration) (line string, wrong bool) {
	want := t.Expected.FirstBad
	switch {
	case want != "" && found == want:
		return fmt.Sprintf("found the planted regression %s in %.0fs (simulated lab).", want[:12], took.Seconds()), false
	case want == "":
		return fmt.Sprintf("the planted regression %s sits among commits that do not build: inconclusive is the honest answer (%.0fs).", t.Regression[:12], took.Seconds()), false
	}
	return fmt.Sprintf("WRONG: found %q, the planted regression is %s (%.0fs).", found, want[:12], took.Seconds()), true
}
