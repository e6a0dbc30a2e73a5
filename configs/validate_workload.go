package configs

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// toolKeys are the workload keys that only some tools read.
var toolKeys = []struct {
	key   string
	tools []string
}{
	{"workload.period", []string{ToolOsnoise, ToolRtlaOsnoise}},
	{"workload.runtime", []string{ToolOsnoise, ToolRtlaOsnoise}},
	{"workload.noise_threshold", []string{ToolOsnoise, ToolRtlaOsnoise}},
	{"workload.priority", []string{ToolRtlaOsnoise, ToolRtlaTimerlat, ToolOslat, ToolCyclictest}},
	{"workload.args", []string{ToolRtlaOsnoise, ToolRtlaTimerlat, ToolOslat, ToolCyclictest}},
	{"workload.command", []string{ToolCommand}},
	{"workload.pattern", []string{ToolCommand}},
	{"workload.json_path", []string{ToolCommand}},
	{"workload.unit", []string{ToolCommand}},
}

func (l *loader) validateWorkload(bp *BootParams) {
	w := &l.job.Workload
	if !l.oneOf("workload.tool", w.Tool, Tools) {
		return
	}
	for _, tk := range toolKeys {
		if l.isSet(tk.key) && !slices.Contains(tk.tools, w.Tool) {
			hint := ""
			if tk.key == "workload.command" {
				hint = "; a background load goes in workload.load"
			}
			l.errorf(l.at(tk.key), tk.key, "tool %s does not use it (only %s)%s", w.Tool, strings.Join(tk.tools, ", "), hint)
		}
	}
	nr := l.job.Machine.CPUs
	switch {
	case bp == nil || l.keyFailed("workload.cpus"):
		// boot.params or the list itself is wrong, as said already.
	case l.isSet("workload.cpus"):
		l.checkIsolation(w.CPUs, bp)
	case len(bp.Isolated()) > 0:
		w.CPUs = bp.Isolated()
		l.job.defaulted["workload.cpus"] = true
		l.checkIsolation(w.CPUs, bp)
	case w.Tool != ToolCommand && !l.quietAbout("boot.params"):
		l.errorf(l.at("workload"), "workload.cpus", "no CPUs to measure: boot.params isolates none (nohz_full, isolcpus); list them in workload.cpus")
	}

	l.durationRange("workload.duration", w.Duration, time.Second, 24*time.Hour)
	if w.Period != 0 || w.Runtime != 0 {
		l.durationRange("workload.period", w.Period, 100*time.Microsecond, time.Minute)
		l.durationRange("workload.runtime", w.Runtime, 100*time.Microsecond, time.Minute)
		if w.Period != 0 && w.Runtime > w.Period {
			l.errorf(l.at("workload.runtime"), "workload.runtime", "%s is longer than workload.period %s", w.Runtime, w.Period)
		}
	}
	l.durationRange("workload.noise_threshold", w.NoiseThreshold, time.Microsecond, time.Second)
	if w.Period == 0 && w.Runtime.D() > time.Second {
		l.errorf(l.at("workload.runtime"), "workload.runtime", "%s is longer than the tracer's default period of 1s; set workload.period too", w.Runtime)
	}
	for _, key := range []string{"workload.period", "workload.runtime", "workload.noise_threshold"} {
		d := map[string]Duration{"workload.period": w.Period, "workload.runtime": w.Runtime, "workload.noise_threshold": w.NoiseThreshold}[key]
		if l.isSet(key) && d.D() > time.Microsecond && d.D()%time.Microsecond != 0 {
			l.errorf(l.at(key), key, "%s is not a whole number of microseconds, which the tracer takes", d)
		}
	}
	if l.isSet("workload.priority") {
		l.intRange("workload.priority", w.Priority, 1, 99)
	}
	if w.Tool == ToolCommand {
		l.validateCommand(w)
	}
	if w.Load == "" {
		if l.isSet("workload.load_cpus") {
			l.errorf(l.at("workload.load_cpus"), "workload.load_cpus", "there is no workload.load to place")
		}
		return
	}
	if !l.isSet("workload.load_cpus") {
		if nr > 0 {
			w.LoadCPUs = allCPUs(nr).Minus(w.CPUs)
			l.job.defaulted["workload.load_cpus"] = true
		}
		return
	}
	if both := w.LoadCPUs.Intersect(w.CPUs); len(both) > 0 {
		l.warnf(l.at("workload.load_cpus"), "workload.load_cpus", "the load runs on measured CPUs %s: its own noise counts against every kernel", both)
	}
}

// checkIsolation warns about measured CPUs the boot parameters leave
// exposed: a verdict on them measures the configuration, not the kernel.
func (l *loader) checkIsolation(cpus CPUs, bp *BootParams) {
	var why []string
	tick, dom := bp.Tickless(), bp.isolcpusHas("domain")
	if tick == nil && !dom && l.quietAbout("boot.params") {
		return // the parameters are probably under a misspelt key
	}
	if tick == nil && !dom {
		why = append(why, "boot.params isolates no CPU (nohz_full, isolcpus)")
	}
	if out := cpus.Minus(tick); tick != nil && len(out) > 0 {
		why = append(why, fmt.Sprintf("CPUs %s keep their tick (not nohz_full)", out))
	}
	if out := cpus.Minus(bp.IsolCPUs); dom && len(out) > 0 {
		why = append(why, fmt.Sprintf("CPUs %s are in the scheduler domains (not in isolcpus)", out))
	}
	if out := cpus.Minus(bp.NoCallbackCPUs()); bp.RCUNocbs != nil && len(out) > 0 {
		why = append(why, fmt.Sprintf("CPUs %s still run RCU callbacks (neither rcu_nocbs nor nohz_full)", out))
	}
	if in := cpus.Intersect(bp.IRQAffinity); len(in) > 0 {
		why = append(why, fmt.Sprintf("irqaffinity sends interrupts to CPUs %s", in))
	}
	if in := cpus.Intersect(bp.KthreadCPUs); len(in) > 0 {
		why = append(why, fmt.Sprintf("kthread_cpus runs kernel threads on CPUs %s", in))
	}
	if len(why) > 0 {
		l.warnf(l.at("workload.cpus"), "workload.cpus", "measured CPUs are not fully isolated: %s", strings.Join(why, "; "))
	}
}

var jsonPath = regexp.MustCompile(`^(\$\.?)?\.?[A-Za-z_][A-Za-z0-9_-]*(\[[0-9]+\]|\.[A-Za-z_][A-Za-z0-9_-]*)*$`)

func (l *loader) validateCommand(w *Workload) {
	if w.Command == "" {
		l.missingf("workload.command", "missing: tool command runs this command and reads its number")
	}
	switch {
	case w.Pattern == "" && w.JSONPath == "":
		l.missingf("workload.pattern", "missing: say where the number is in the command's output (workload.pattern, a regular expression, or workload.json_path)")
	case w.Pattern != "" && w.JSONPath != "":
		l.errorf(l.at("workload.json_path"), "workload.json_path", "give workload.pattern or workload.json_path, not both")
	case w.Pattern != "":
		re, err := regexp.Compile(w.Pattern)
		if err != nil {
			l.errorf(l.at("workload.pattern"), "workload.pattern", "not a regular expression: %v", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			break
		}
		if re.NumSubexp() != 1 && re.SubexpIndex("value") < 0 {
			l.errorf(l.at("workload.pattern"), "workload.pattern", "has %d groups: capture the number in one group, e.g. 'Run time: ([0-9.]+)ms', or name it (?P<value>…)", re.NumSubexp())
		}
	default:
		if !jsonPath.MatchString(w.JSONPath) {
			l.errorf(l.at("workload.json_path"), "workload.json_path", "%q is not a JSON path (write keys and indexes like results.max_ns or runs[0].time)", w.JSONPath)
		}
	}
	if !slices.Contains(CommandUnits, w.Unit) {
		l.errorf(l.at("workload.unit"), "workload.unit", "%q is not a unit of time (ns, us, ms or s; leave it out for a plain number)", w.Unit)
	}
}

func (l *loader) validateVerdict() {
	v := &l.job.Verdict
	w := &l.job.Workload
	ms := Metrics(w.Tool)
	if len(ms) == 0 {
		return // the tool itself is wrong, said already
	}
	m, ok := MetricOf(w.Tool, v.Metric)
	if !ok {
		names := make([]string, len(ms))
		for i, x := range ms {
			names[i] = x.Name
		}
		msg := fmt.Sprintf("tool %s does not report %q (it reports %s)", w.Tool, v.Metric, strings.Join(names, ", "))
		if c := closest(v.Metric, names); c != "" {
			msg += fmt.Sprintf("; did you mean %q?", c)
		}
		l.errorf(l.at("verdict.metric"), "verdict.metric", "%s", msg)
	} else {
		if w.Tool == ToolCommand && w.Unit != "" {
			m.Unit = UnitTime
		}
		l.checkThreshold(m, v.Threshold)
	}
	l.oneOf("verdict.aggregate", v.Aggregate, Aggregates)
	if v.Direction != "" { // else the metric is unknown, said above
		l.oneOf("verdict.direction", v.Direction, []string{HigherIsBad, LowerIsBad})
	}
	if l.intRange("verdict.samples.min", v.Samples.Min, 1, 10000) && v.Samples.Max < v.Samples.Min {
		l.errorf(l.at("verdict.samples.max"), "verdict.samples.max", "%d is fewer than verdict.samples.min %d", v.Samples.Max, v.Samples.Min)
	} else {
		l.intRange("verdict.samples.max", v.Samples.Max, 1, 10000)
	}
	l.intRange("verdict.boots", v.Boots, 1, 100)
	l.oneOf("verdict.search", v.Search, []string{SearchPosterior, SearchRule})
	if v.Search == SearchRule {
		// Kept readable for the state directories rule runs made.
		l.warnf(l.at("verdict.search"), "verdict.search", "rule: kbisect run --job no longer searches by git's choice of commits and refuses this job; remove the key (the posterior search is the default; run --exec without --confidence keeps git's choice)")
	}
	if v.MaxBoots != 0 {
		l.intRange("verdict.max_boots", v.MaxBoots, 10, 100000)
	}
	if v.Confidence <= 0.5 || v.Confidence >= 1 {
		l.errorf(l.at("verdict.confidence"), "verdict.confidence", "%g is not between 0.5 and 1 (e.g. 0.95)", v.Confidence)
	}
}

// checkThreshold checks that the threshold is the kind of quantity the
// metric is: a time for latencies, a count for interrupts, and so on.
func (l *loader) checkThreshold(m Metric, t Threshold) {
	key := "verdict.threshold"
	switch t.Kind {
	case ThresholdAuto, ThresholdRatio:
		return
	case ThresholdTime:
		if m.Unit == UnitTime {
			return
		}
	case ThresholdPercent:
		if m.Unit == UnitPercent {
			return
		}
	case ThresholdNumber:
		if m.Unit == UnitCount || m.Unit == UnitNumber {
			return
		}
		if m.Unit == UnitTime {
			l.errorf(l.at(key), key, "%s has no unit, and %s is a time (write e.g. %sus)", t, m.Name, t)
			return
		}
	}
	want := map[Unit]string{
		UnitTime:    "a time like 20us or 1.5ms",
		UnitCount:   "a number of events like 100",
		UnitPercent: "a percentage like 99.5%",
		UnitNumber:  "a number like 8600",
	}[m.Unit]
	l.errorf(l.at(key), key, "%s does not fit %s, which is %s: write %s, a ratio like 3x, or auto", t, m.Name, m.Unit, want)
}

func (l *loader) validateReport() {
	r := &l.job.Report
	seen := map[string]bool{}
	for i, f := range r.Formats {
		key := fmt.Sprintf("report.formats[%d]", i)
		if !l.oneOf(key, f, ReportFormats) {
			continue
		}
		if seen[f] {
			l.errorf(l.at(key), key, "%s is listed twice", f)
		}
		seen[f] = true
	}
}
