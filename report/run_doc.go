package report

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/internal/shell"
	"kbisect/lab"
	"kbisect/noise"
)

// The report package draws and writes; these fill its document from a
// run's or an A/B comparison's state.

// runDocument is a bisection's report document.
func (r *Run) Document(ctx context.Context, now time.Time) *Document {
	d := &Document{Kind: "run", Result: string(r.Result.Kind), Generated: now.UTC().Format(time.RFC3339)}
	if d.Result == "" {
		d.Result = "in-progress"
	}
	var text bytes.Buffer
	r.WriteText(ctx, &text)
	d.Text = text.String()
	d.Summary = summaryLines(d.Text)
	machine := ""
	if r.Job != nil {
		machine = r.Job.Machine.Name
		setupOf(d, r.Job)
	}
	switch r.Result.Kind {
	case bisect.Found:
		d.Title = fmt.Sprintf("kbisect: %s is the first bad commit", r.Result.FirstBad.String()[:12])
	default:
		d.Title = "kbisect run: " + d.Result
	}
	if machine != "" {
		d.Title += " (" + machine + ")"
	}
	d.Command = r.commandLine()
	for _, rw := range r.rows(ctx) {
		t := Tested{Commit: rw.commit.String(), Subject: rw.subject, Verdict: rw.verdict,
			Endpoint: rw.from == fromEndpoint, Culprit: r.Result.Kind == bisect.Found && rw.commit == r.Result.FirstBad}
		if ev := rw.ev; ev != nil {
			t.Note = ev.Reason
			if len(ev.Values) > 0 {
				t.Values = ev.Values
				t.Median, t.Low, t.High = MedianRange(ev.Values)
			}
			if ev.Decision != nil && ev.Decision.Threshold != 0 && !d.Metric.HasThreshold {
				d.Metric.Threshold, d.Metric.HasThreshold = ev.Decision.Threshold, true
			}
		}
		d.Tested = append(d.Tested, t)
	}
	if r.Calibration != nil && !d.Metric.HasThreshold && r.Calibration.Rule.Kind == noise.Absolute {
		d.Metric.Threshold, d.Metric.HasThreshold = r.Calibration.Rule.Threshold, true
	}
	if c := r.Confirmation; c != nil {
		check := Check{Name: "confirmation", Detail: strings.Join(c.Flags, "\n")}
		if !c.Confirmed {
			check.Failure = "the first bad commit is NOT confirmed on fresh boots: read the flags"
			if len(c.Flags) > 0 {
				check.Failure += " (" + c.Flags[0] + ")"
			}
		}
		d.Checks = append(d.Checks, check)
	}
	if s := r.Search; s != nil {
		text := r.posteriorText()
		check := Check{Name: "probability", Detail: text}
		if r.Result.Kind == bisect.Inconclusive {
			check.Failure = text
		}
		d.Checks = append(d.Checks, check)
		if text != "" {
			d.Summary = append(d.Summary, text)
		}
		for i := range d.Tested {
			if sc := r.searchCell(d.Tested[i].Commit); sc != "" && !d.Tested[i].Endpoint {
				d.Tested[i].Note = "each value is one boot's median; " + sc
			}
		}
	}
	if good, bad := r.pair(); good != nil && bad != nil {
		if rep, err := r.compare(good, bad); err == nil {
			d.AB = abOf(rep, good, bad, d.Metric)
		}
	}
	return d
}

// abDocument is an A/B comparison's report document.
func ABDocument(job *configs.Job, res *lab.ABResult, now time.Time) *Document {
	d := &Document{Kind: "ab", Generated: now.UTC().Format(time.RFC3339), Command: res.Plan.Command}
	var text bytes.Buffer
	_ = WriteABText(&text, job, res)
	d.Text = text.String()
	if job != nil {
		setupOf(d, job)
	}
	p := res.Plan
	d.Summary = []string{"A: " + p.ALabel, "B: " + p.BLabel,
		fmt.Sprintf("%d rounds of %d samples a side, alternating, each on a fresh boot", p.Rounds, p.Samples)}
	if res.Report == nil {
		d.Result, d.Title = "in-progress", fmt.Sprintf("kbisect ab: %d of %d rounds measured", len(res.Rounds), 2*p.Rounds)
		return d
	}
	d.Result = ABVerdict(res)
	d.Title = "kbisect ab: " + res.Report.Conclusion
	d.Summary = append([]string{res.Report.Conclusion}, d.Summary...)
	a, b := abSides(res)
	d.AB = abOf(res.Report, a, b, d.Metric)
	d.AB.A.Name, d.AB.B.Name = "A: "+p.ALabel, "B: "+p.BLabel
	return d
}

// setupOf fills what the job says about the machine and its kernels.
func setupOf(d *Document, job *configs.Job) {
	d.Machine = job.Machine.Name
	d.BootParams = strings.TrimSpace(job.Boot.Params + " " + job.Boot.ExtraCmdline)
	d.Config = []string{"base: " + job.Build.Config}
	for _, f := range job.Build.Fragments {
		d.Config = append(d.Config, "fragment: "+string(f))
	}
	for _, o := range job.Build.Options {
		d.Config = append(d.Config, "option: "+o)
	}
	d.Metric.Name, d.Metric.Label = job.Verdict.Metric, noise.Label(job.Verdict.Metric)
	if info, err := noise.Metric(job.Workload.Tool, job.Verdict.Metric); err == nil {
		d.Metric.Kind, d.Metric.HigherIsBad = info.Kind, info.HigherIsBad
	}
}

// abOf is the comparison of two kernels' evidence for the
func abOf(rep *noise.ABReport, a, b *lab.Evidence, metric Metric) *AB {
	c := rep.Comparison
	return &AB{
		A:          Side{Name: rep.A.Name, Commit: a.Commit, Values: rep.A.Values, PerCPU: perCPU(a, metric)},
		B:          Side{Name: rep.B.Name, Commit: b.Commit, Values: rep.B.Values, PerCPU: perCPU(b, metric)},
		Conclusion: rep.Conclusion, P: c.P, Shift: c.Shift, ShiftLow: c.ShiftLow, ShiftHigh: c.ShiftHigh,
		Confidence: c.Confidence, Significant: c.Significant(),
	}
}

// perCPU is each CPU's worst value of the metric over the samples.
func perCPU(ev *lab.Evidence, metric Metric) []CPUValue {
	worst := map[int]float64{}
	for _, m := range ev.Samples {
		vals, err := m.MetricValues(metric.Name)
		if err != nil || len(vals) != len(m.CPUs) {
			continue
		}
		for i, c := range m.CPUs {
			v, ok := worst[c.CPU]
			if !ok || (metric.HigherIsBad && vals[i] > v) || (!metric.HigherIsBad && vals[i] < v) {
				worst[c.CPU] = vals[i]
			}
		}
	}
	var out []CPUValue
	for cpu, v := range worst {
		out = append(out, CPUValue{CPU: cpu, Value: v})
	}
	slices.SortFunc(out, func(a, b CPUValue) int { return a.CPU - b.CPU })
	return out
}

// MedianRange is the median, least and greatest of values (not empty).
func MedianRange(values []float64) (med, lo, hi float64) {
	return noise.Median(values), slices.Min(values), slices.Max(values)
}

// summaryLines are the first paragraph of a text
func summaryLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == "" {
			if len(out) > 0 {
				break
			}
			continue
		}
		out = append(out, l)
		if len(out) == 6 {
			break
		}
	}
	return out
}

// runCommandLine is the kbisect command that makes (or resumes) the run.
func runCommandLine(start bisect.Record) string {
	if c := start.Meta["reproduce"]; c != "" {
		return c
	}
	args := []string{"kbisect", "run"}
	if job := start.Meta["job"]; job != "" {
		args = append(args, "--job", job)
	}
	if exec := start.Meta["exec"]; exec != "" {
		args = append(args, "--exec", exec)
	}
	for _, g := range start.GoodRevs {
		args = append(args, "--good", g)
	}
	if start.BadRev != "" {
		args = append(args, "--bad", start.BadRev)
	}
	if start.FirstParent {
		args = append(args, "--first-parent")
	}
	return shell.Join(args...)
}
