package report

import (
	"fmt"
	"io"
	"strings"

	"kbisect/configs"
	"kbisect/lab"
	"kbisect/noise"
)

// abSides gathers each side's rounds into one evidence: its samples and
// values in the order taken.
func abSides(res *lab.ABResult) (a, b *lab.Evidence) {
	if a = res.Pooled("a"); a == nil {
		a = &lab.Evidence{Commit: res.Plan.A}
	}
	if b = res.Pooled("b"); b == nil {
		b = &lab.Evidence{Commit: res.Plan.B}
	}
	return a, b
}

// abSide is one kernel of a comparison, named for the report.
type abSide struct {
	name string
	ev   *lab.Evidence
}

// measuredSides are the sides with samples, A first.
func measuredSides(res *lab.ABResult) []abSide {
	a, b := abSides(res)
	var out []abSide
	for _, s := range []abSide{{"A: " + res.Plan.ALabel, a}, {"B: " + res.Plan.BLabel, b}} {
		if len(s.ev.Samples) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// writeABText writes an A/B comparison as RT people mail it: the verdict
// first, the summary across CPUs side by side, the comparison, then each
// kernel's per-CPU table.
func WriteABText(w io.Writer, job *configs.Job, res *lab.ABResult) error {
	p := res.Plan
	if res.Report == nil {
		fmt.Fprintf(w, "A/B in progress: %d of %d rounds measured (A %s, B %s)\n", len(res.Rounds), 2*p.Rounds, p.ALabel, p.BLabel)
		return nil
	}
	para(w, "", "", "%s", res.Report.Conclusion)
	fmt.Fprintf(w, "\nA: %s\nB: %s\n", p.ALabel, p.BLabel)
	para(w, "", "", "%d rounds of %d samples a side, alternating A, B, each on a fresh boot.", p.Rounds, p.Samples)
	fmt.Fprintln(w)
	if err := WriteABSummary(w, shortNames(res.Report)); err != nil {
		return err
	}
	for _, side := range measuredSides(res) {
		fmt.Fprintf(w, "\n")
		para(w, "", "", "%s (%s), the sample with the median %s:", side.name, side.ev.Release, side.ev.Metric)
		if err := WriteTable(w, MedianSample(side.ev)); err != nil {
			return err
		}
	}
	writeSetup(w, job)
	if p.Command != "" {
		para(w, "Reproduce: ", "  ", "%s", p.Command)
	}
	return nil
}

// shortNames is the report with its sides called A and B: their names
// head the text above, and the table stays within a mail's width.
func shortNames(r *noise.ABReport) *noise.ABReport {
	c := *r
	c.A.Name, c.B.Name = "", ""
	return &c
}

// writeABMarkdown is the same for issue trackers.
func WriteABMarkdown(w io.Writer, job *configs.Job, res *lab.ABResult) error {
	p := res.Plan
	if res.Report == nil {
		fmt.Fprintf(w, "**A/B in progress:** %d of %d rounds measured (A `%s`, B `%s`)\n", len(res.Rounds), 2*p.Rounds, p.ALabel, p.BLabel)
		return nil
	}
	fmt.Fprintf(w, "**%s**\n\n", res.Report.Conclusion)
	fmt.Fprintf(w, "- A: `%s`\n- B: `%s`\n- %d rounds of %d samples a side, alternating A, B, each on a fresh boot\n\n", p.ALabel, p.BLabel, p.Rounds, p.Samples)
	if err := WriteABSummaryMarkdown(w, shortNames(res.Report)); err != nil {
		return err
	}
	for _, side := range measuredSides(res) {
		fmt.Fprintf(w, "\n**%s** (`%s`), the sample with the median %s:\n\n", side.name, side.ev.Release, side.ev.Metric)
		if err := WriteTableMarkdown(w, MedianSample(side.ev)); err != nil {
			return err
		}
	}
	writeSetupMarkdown(w, job, p.Command)
	return nil
}

// writeSetupMarkdown is the setup and the command, folded.
func writeSetupMarkdown(w io.Writer, job *configs.Job, command string) {
	if job == nil && command == "" {
		return
	}
	fmt.Fprintf(w, "\n<details><summary>Setup and command</summary>\n\n```")
	writeSetup(w, job)
	if command != "" {
		fmt.Fprintf(w, "Reproduce: %s\n", command)
	}
	fmt.Fprintf(w, "```\n</details>\n")
}

// writeSetup says what the kernels were built and booted with.
func writeSetup(w io.Writer, job *configs.Job) {
	if job == nil {
		return
	}
	machine := job.Machine.Name
	if job.Machine.Description != "" {
		machine += " (" + job.Machine.Description + ")"
	}
	fmt.Fprintln(w)
	para(w, "Machine: ", "  ", "%s", machine)
	para(w, "Boot parameters: ", "  ", "%s", strings.TrimSpace(job.Boot.Params+" "+job.Boot.ExtraCmdline))
	config := []string{job.Build.Config}
	for _, f := range job.Build.Fragments {
		config = append(config, string(f))
	}
	config = append(config, job.Build.Options...)
	para(w, "Kernel config: ", "  ", "%s", strings.Join(config, " + "))
	para(w, "Workload: ", "  ", "%s on CPUs %s, verdict on %s (%s over CPUs)", job.Workload.Tool, job.Workload.CPUs, job.Verdict.Metric, job.Verdict.Aggregate)
}
