package run

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"kbisect/configs"
	"kbisect/history"
	"kbisect/internal/usage"
)

// historyBoots are the nightly history's measurements of the good and the
// bad kernels on one machine (the job's, or the database's only one),
// each measurement one boot: a night boots a release once and measures
// it. The history keeps no boot boundaries, so a measurement that pooled
// several boots (alternating rounds, verdict.boots > 1) counts as one.
func historyBoots(ctx context.Context, path string, good, bad []string, job *configs.Job) (*learnBoots, error) {
	if len(good) == 0 || len(bad) == 0 {
		return nil, usage.Errorf("--from-history %s: name the kernels to learn from, --good-kernel TAG and --bad-kernel TAG "+
			"(releases as kbisect history lists them, or commits), each as often as you like", path)
	}
	for _, k := range good {
		if slices.Contains(bad, k) {
			return nil, usage.Errorf("--good-kernel and --bad-kernel both name %s", k)
		}
	}
	if _, err := os.Stat(path); err != nil {
		return nil, usage.Errorf("--from-history %s: %v: give the nightly's database (<git dir of build.tree>/kbisect/history.db, or nightly's --db)", path, pathErr(err))
	}
	d, err := history.Open(ctx, path)
	if err != nil {
		return nil, usage.Wrap(err)
	}
	defer d.Close()
	machine, err := historyMachine(ctx, d, job)
	if err != nil {
		return nil, err
	}
	trees, err := d.Trees(ctx, machine)
	if err != nil {
		return nil, err
	}
	var all []history.Measurement
	for _, w := range trees {
		ms, err := d.Measurements(ctx, w)
		if err != nil {
			return nil, err
		}
		all = append(all, ms...)
	}
	b := &learnBoots{from: path, flags: fmt.Sprintf("--from-history %s", path),
		advice: "; give --good-kernel a kernel the history measured good and --bad-kernel one it measured bad"}
	var first *history.Measurement
	for _, side := range []struct {
		flag    string
		kernels []string
		boots   *[][]float64
	}{{"--good-kernel", good, &b.good}, {"--bad-kernel", bad, &b.bad}} {
		for _, k := range side.kernels {
			n := 0
			for i, m := range all {
				if m.Tag != k && (len(k) < 7 || !strings.HasPrefix(m.Commit, k)) {
					continue
				}
				n++
				if len(m.Values) == 0 { // it did not build or boot that night
					continue
				}
				if first == nil {
					first = &all[i]
				} else if m.Metric != first.Metric || m.Kind != first.Kind {
					return nil, usage.Errorf("--from-history %s: %s was measured as %s, %s as %s: give kernels measured on one metric", path, m.Tag, m.Metric, first.Tag, first.Metric)
				}
				*side.boots = append(*side.boots, m.Values)
			}
			if n == 0 {
				return nil, usage.Errorf("--from-history %s: %s %s: no measurement of it on %s (it measured %s)", path, side.flag, k, machine, measuredTags(all))
			}
		}
	}
	if first == nil {
		return nil, usage.Errorf("--from-history %s: the kernels named have no samples (they did not build or boot): name others", path)
	}
	b.kind = first.Kind
	if b.higherIsBad, err = direction(job, "", first.Metric); err != nil {
		return nil, err
	}
	b.about = fmt.Sprintf("%s in %s of %s and %d of %s on %s, one boot each", first.Metric, plural(len(b.good), "nightly measurement"),
		strings.Join(good, ", "), len(b.bad), strings.Join(bad, ", "), machine)
	return b, nil
}

// historyMachine is the machine to learn about: the job's, or the one
// the database holds.
func historyMachine(ctx context.Context, d *history.DB, job *configs.Job) (string, error) {
	machines, err := d.Machines(ctx)
	if err != nil {
		return "", err
	}
	switch {
	case job != nil && !slices.Contains(machines, job.Machine.Name):
		return "", usage.Errorf("--from-history %s holds no measurement of %s (the machine of --job %s); it holds %s", d.Path, job.Machine.Name, job.File, listNames(machines))
	case job != nil:
		return job.Machine.Name, nil
	case len(machines) == 0:
		return "", usage.Errorf("--from-history %s holds no measurement yet (kbisect nightly writes them)", d.Path)
	case len(machines) > 1:
		return "", usage.Errorf("--from-history %s holds the machines %s: give --job FILE of the one to learn about", d.Path, listNames(machines))
	}
	return machines[0], nil
}

// measuredTags lists the tags of the measurements, each once, in the order first
// measured.
func measuredTags(ms []history.Measurement) string {
	var out []string
	for _, m := range ms {
		if !slices.Contains(out, m.Tag) {
			out = append(out, m.Tag)
		}
	}
	return listNames(out)
}

// listNames writes names for a message: all of them up to 12, then how many
// more.
func listNames(names []string) string {
	if len(names) == 0 {
		return "nothing"
	}
	if len(names) > 12 {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:12], ", "), len(names)-12)
	}
	return strings.Join(names, ", ")
}
