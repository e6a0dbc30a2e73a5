package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"kbisect/configs"
	"kbisect/internal/usage"
	"kbisect/lab"
	"kbisect/noise"
)

// learnBoots are real boots of a good and a bad kernel, each boot its
// samples' values of one metric, and what to say of them.
type learnBoots struct {
	good, bad   [][]float64
	kind        string
	higherIsBad bool
	// from names the source and about the boots, for the line that says
	// what was learned.
	from, about string
	// flags begins an error of the fit; advice ("; …", or "") ends it.
	flags, advice string
}

// realBoots reads the boots of the one source the options name: a
// state directory, measure files or the nightly history (nil: none).
func realBoots(ctx context.Context, o SimulateOptions, job *configs.Job) (*learnBoots, error) {
	measures := len(o.GoodMeasures)+len(o.BadMeasures) > 0
	sources := 0
	for _, given := range []bool{o.State != "", measures, o.History != ""} {
		if given {
			sources++
		}
	}
	switch {
	case sources > 1:
		return nil, usage.Errorf("simulate: learn the noise from one source: --from-state, --good-measure and --bad-measure, or --from-history")
	case o.History == "" && len(o.GoodKernels)+len(o.BadKernels) > 0:
		return nil, usage.Errorf("--good-kernel and --bad-kernel name kernels of the nightly history: give --from-history DB too")
	case o.State != "":
		return stateBoots(o.State)
	case measures:
		return measureBoots(o.GoodMeasures, o.BadMeasures, job)
	case o.History != "":
		return historyBoots(ctx, o.History, o.GoodKernels, o.BadKernels, job)
	}
	return nil, nil
}

// stateBoots are a state directory's calibration boots of the endpoints
// (a posterior search's 3-8 boots each, or the rule's).
func stateBoots(dir string) (*learnBoots, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, usage.Errorf("--from-state %s: %v", dir, pathErr(err))
	}
	cal, err := lab.ReadCalibration(dir)
	if err != nil {
		return nil, usage.Errorf("--from-state %s: %v", dir, err)
	}
	if cal == nil || cal.Good == nil || cal.Bad == nil {
		return nil, usage.Errorf("--from-state %s: no calibration there yet (the run measures its endpoints first)", dir)
	}
	boots := func(ev *lab.Evidence) [][]float64 {
		var out [][]float64
		at := 0
		for _, b := range ev.Boots {
			if b.Samples <= 0 || at+b.Samples > len(ev.Values) {
				continue
			}
			out = append(out, ev.Values[at:at+b.Samples])
			at += b.Samples
		}
		if len(out) == 0 && len(ev.Values) > 0 { // one boot, its samples not counted
			out = append(out, ev.Values)
		}
		return out
	}
	b := &learnBoots{good: boots(cal.Good), bad: boots(cal.Bad), kind: cal.Rule.MetricKind, higherIsBad: cal.Rule.HigherIsBad,
		from: dir, flags: fmt.Sprintf("--from-state %s: the endpoints' boots give no model", dir)}
	b.about = fmt.Sprintf("%d and %s of the endpoints", len(b.good), plural(len(b.bad), "boot"))
	return b, nil
}

// measureBoots are kbisect measure --json files of a good and a bad
// kernel, a boot each; the direction is the job's, or the metric's own.
func measureBoots(good, bad []string, job *configs.Job) (*learnBoots, error) {
	if len(good) == 0 || len(bad) == 0 {
		return nil, usage.Errorf("--good-measure and --bad-measure go together: give one file or more of each, " +
			"a boot of a good and of a bad kernel (kbisect measure --json > FILE on each)")
	}
	b := &learnBoots{from: fmt.Sprintf("%d good and %d bad measure files", len(good), len(bad)),
		flags:  fmt.Sprintf("--good-measure %s and --bad-measure %s", strings.Join(good, ", "), strings.Join(bad, ", ")),
		advice: "; give files of a kernel that measures good (--good-measure) and of one that measures bad (--bad-measure), of one metric"}
	var first, firstFlag, firstPath, tool string
	for _, side := range []struct {
		flag  string
		paths []string
		boots *[][]float64
	}{{"--good-measure", good, &b.good}, {"--bad-measure", bad, &b.bad}} {
		for _, path := range side.paths {
			r, err := readMeasure(side.flag, path)
			if err != nil {
				return nil, err
			}
			if firstPath == "" {
				first, firstFlag, firstPath, b.kind = r.Metric, side.flag, path, r.Kind
			} else if r.Metric != first || r.Kind != b.kind {
				return nil, usage.Errorf("%s %s measures %s, %s %s %s: give boots of one metric", side.flag, path, r.Metric, firstFlag, firstPath, first)
			}
			if len(r.Samples) > 0 && r.Samples[0] != nil {
				tool = r.Samples[0].Tool
			}
			*side.boots = append(*side.boots, r.Values)
		}
	}
	var err error
	if b.higherIsBad, err = direction(job, tool, first); err != nil {
		return nil, err
	}
	b.about = fmt.Sprintf("%s in %s of the good kernel and %d of the bad, a file each", first, plural(len(b.good), "boot"), len(b.bad))
	return b, nil
}

// readMeasure reads one kbisect measure --json file.
func readMeasure(flag, path string) (*lab.MeasureResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usage.Errorf("%s %s: %v", flag, path, pathErr(err))
	}
	var r lab.MeasureResult
	if err := json.Unmarshal(data, &r); err != nil || r.Metric == "" || r.Kind == "" {
		why := "no metric in it"
		if err != nil {
			why = err.Error()
		}
		return nil, usage.Errorf("%s %s is not what kbisect measure --json writes (%s): give the file of one boot, kbisect measure --json > FILE", flag, path, why)
	}
	if len(r.Values) == 0 {
		return nil, usage.Errorf("%s %s has no samples: measure that kernel again (kbisect measure --json --samples 5 > FILE)", flag, path)
	}
	return &r, nil
}

// direction reports whether higher values of the metric are worse: the
// job's verdict.direction (its metric must be this one), else the
// metric's own, of the tool when known or of any tool.
func direction(job *configs.Job, tool, metric string) (bool, error) {
	if job != nil {
		if job.Verdict.Metric != metric {
			return false, usage.Errorf("--job %s judges %s (verdict.metric), the boots measure %s: give the job they were measured with, or none",
				job.File, job.Verdict.Metric, metric)
		}
		return job.Verdict.Direction != configs.LowerIsBad, nil
	}
	tools := configs.Tools
	if tool != "" {
		tools = []string{tool}
	}
	for _, t := range tools {
		if info, err := noise.Metric(t, metric); err == nil {
			return info.HigherIsBad, nil
		}
	}
	return false, usage.Errorf("the boots measure %s, which kbisect does not know: give --job FILE, whose verdict.direction says which way is worse", metric)
}

// plural writes n things: "1 boot", "3 boots".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// pathErr is a file's error without its path, which the message names
// already.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
