package report

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"kbisect/configs"
	"kbisect/noise"
	"kbisect/simulate"
)

// WriteSimulation writes what kbisect simulate found: per strategy, how
// often it named the right commit, a wrong one, or none, and what that
// cost, with the setting it was simulated in.
func WriteSimulation(w io.Writer, res *simulate.Result) error {
	v := func(x float64) string { return noise.FormatValue(noise.KindTime, x) }
	if res.Kind != noise.KindTime {
		v = func(x float64) string { return noise.FormatValue(res.Kind, x) }
	}
	boots := "boots\tboots p95\tbuilds\tsamples"
	if res.Exec {
		fmt.Fprintf(w, "%d simulated bisections of %d commits (seed %d) with a pass/fail test: a good commit's run fails %g %%, a bad one's %g %%\n",
			res.Runs, res.Commits, res.Seed, 100*res.FailGood, 100*res.FailBad)
		fmt.Fprintf(w, "costs: build %s, a run %s; confidence %g\n\n", seconds(res.Costs.Build), seconds(res.Costs.Boot+res.Costs.Sample), res.Confidence)
		boots = "runs\truns p95\tbuilds"
	} else {
		fmt.Fprintf(w, "%d simulated bisections of %d commits (seed %d): good kernels %s, bad %s, threshold %s\n",
			res.Runs, res.Commits, res.Seed, v(res.Good), v(res.Bad), v(res.Threshold))
		fmt.Fprintf(w, "noise: %s\n", res.Noise)
		if res.FirstStep > 0 {
			fmt.Fprintf(w, "two steps: the first bad commit takes a kernel to %s, a later one on to %s; right is naming the first\n", v(res.FirstStep), v(res.Bad))
		}
		if res.Machines > 1 {
			fmt.Fprintf(w, "machines: %d booting at once into one posterior, their levels spread %g; hours are the wall time\n", res.Machines, res.MachineSpread)
		}
		if res.Merges > 0 || res.Broken > 0 || res.NoRevert > 0 {
			fmt.Fprintf(w, "range: %g %% of the mainline's commits merge a topic branch; %g %% of the commits do not build; %g %% of the reverts do not apply\n",
				100*res.Merges, 100*res.Broken, 100*res.NoRevert)
		}
		from := ""
		if res.SearchFromOne {
			from = " (kbisect's search boots from 1 where calibration finds one sample decisive)"
		}
		fmt.Fprintf(w, "costs: build %s, boot %s, sample %s; %d–%d samples a boot%s, confidence %g\n\n",
			seconds(res.Costs.Build), seconds(res.Costs.Boot), seconds(res.Costs.Sample), res.MinSamples, res.MaxSamples, from, res.Confidence)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "strategy\tright\twrong found\tinconclusive\tnot reproduced\t%s\thours\t\n", boots)
	pct := func(n int) string { return fmt.Sprintf("%.1f %%", 100*float64(n)/float64(res.Runs)) }
	for _, s := range res.Strategies {
		samples := fmt.Sprintf("\t%.1f", s.MeanSamples)
		if res.Exec {
			samples = "" // a run is its one sample
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1f\t%d\t%.1f%s\t%.1f\t\n", s.Name, pct(s.Right), pct(s.WrongFound), pct(s.Inconclusive), pct(s.NotReproduced),
			s.MeanBoots, s.P95Boots, s.MeanBuilds, samples, s.MeanHours)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, s := range res.Strategies {
		fmt.Fprintf(w, "%-10s  %s\n", s.Name, s.About)
	}
	if len(res.Strategies) > 0 && res.Runs < 1000 {
		fmt.Fprintf(w, "\n%d runs: a share is known to about ±%.1f points; --runs 1000 or more to compare strategies.\n", res.Runs, 100*math.Sqrt(0.25/float64(res.Runs)))
	}
	return nil
}

// seconds writes a cost as a duration people read: 10m, 2m, 90s.
func seconds(s float64) string {
	return configs.Duration(time.Duration(s * float64(time.Second)).Round(time.Second)).String()
}
