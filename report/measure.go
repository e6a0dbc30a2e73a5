package report

import (
	"fmt"
	"io"
	"kbisect/configs"
	"kbisect/lab"
	"kbisect/noise"
	"slices"
	"strings"
)

// WriteSample writes one sample of kbisect measure: its per-CPU table.
func WriteSample(w io.Writer, job *configs.Job, i int, m *noise.Measurement) {
	fmt.Fprintf(w, "Sample %d (%s, CPUs %s, %s):\n", i, m.Tool, job.Workload.CPUs, job.Workload.Duration)
	_ = WriteTable(w, m)
	fmt.Fprintln(w)
}

// WriteSampleValue says one sample's value of the job's metric, as
// kbisect measure does while it measures.
func WriteSampleValue(w io.Writer, job *configs.Job, i int, v float64) {
	kind, _ := lab.MetricKind(job)
	fmt.Fprintf(w, "sample %d: %s of the %s CPU: %s\n", i, job.Verdict.Metric, worstWord(job.Verdict.Aggregate), noise.FormatValue(kind, v))
}

// WriteMeasureText writes what kbisect measure found: each sample's value,
// their median and range, and the verdict when the rule could decide.
func WriteMeasureText(w io.Writer, job *configs.Job, res *lab.MeasureResult) {
	values := make([]string, len(res.Values))
	for i, v := range res.Values {
		values[i] = noise.FormatValue(res.Kind, v)
	}
	fmt.Fprintf(w, "%s of the %s CPU per sample: %s\n", job.Verdict.Metric, worstWord(job.Verdict.Aggregate), strings.Join(values, ", "))
	if len(res.Values) > 1 {
		med, _ := noise.Aggregate(res.Values, "median")
		fmt.Fprintf(w, "median %s, range %s to %s\n", noise.FormatValue(res.Kind, med), noise.FormatValue(res.Kind, slices.Min(res.Values)), noise.FormatValue(res.Kind, slices.Max(res.Values)))
	}
	if d := res.Decision; d != nil {
		fmt.Fprintf(w, "verdict: %s (%s)\n", d.Verdict, d.Reason)
	} else {
		fmt.Fprintf(w, "no verdict: threshold %s needs both endpoints, measured by kbisect run\n", job.Verdict.Threshold)
	}
}

// worstWord names the CPU an aggregate picks: "worst" for max.
func worstWord(aggregate string) string {
	if aggregate == "max" {
		return "worst"
	}
	return aggregate
}

// ParsedJSON is kbisect parse --json: the measurement and its summary.
type ParsedJSON struct {
	*noise.Measurement
	Summary noise.Summary `json:"summary"`
}
