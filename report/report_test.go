package report

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"kbisect/internal/usage"
	"kbisect/noise"
	"kbisect/verdict"
	"math"
	"regexp"
	"strings"
	"testing"
)

// hostile is a commit subject that would run a script, or break the
// markup, if any path forgot to escape it.
const hostile = `sched: <script>alert(1)</script> & "x" isn't escaped`

// spread gives n deterministic samples around center, within ±10 %.
func spread(center float64, n int) []float64 {
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = center * (1 + 0.1*math.Sin(float64(i*7+1)))
	}
	return vs
}

func tested(commit, subject string, v verdict.Verdict, values []float64) Tested {
	t := Tested{Commit: commit, Subject: subject, Verdict: v, Values: values}
	if len(values) > 0 {
		t.Median = noise.Median(values)
		t.Low, t.High = math.Inf(1), math.Inf(-1)
		for _, v := range values {
			t.Low, t.High = math.Min(t.Low, v), math.Max(t.High, v)
		}
	}
	return t
}

// bisectionDocument is a bisection of the osnoise regression of the
// seed: good kernels around 3 µs of noise per period, bad ones around
// 50 ms, with the A/B comparison that confirmed the culprit.
func bisectionDocument() *Document {
	hash := func(i int) string { return fmt.Sprintf("%02d", i) + strings.Repeat("a1b2c3d4e5", 4)[:38] }
	ts := []Tested{
		tested(hash(0), "Linux 6.12.70", "good", spread(3000, 10)),
		tested(hash(1), "mm: fix a comment", "good", append(spread(4000, 5), 0)),
		tested(hash(2), "net: tidy up", "good", spread(3500, 5)),
		tested(hash(3), "drm: does not build", "skip", nil),
		tested(hash(4), hostile, "good", spread(5000, 5)),
		tested(hash(5), "rcu: nothing to see", "good", spread(3200, 5)),
		tested(hash(6), "locking: spin in the tick", "bad", spread(49e6, 5)),
		tested(hash(7), "fs: later change", "bad", spread(50e6, 5)),
		tested(hash(8), "kbuild: later still", "bad", spread(48e6, 5)),
		tested(hash(9), "Linux 6.12.78", "bad", spread(50e6, 10)),
	}
	ts[0].Endpoint, ts[9].Endpoint = true, true
	ts[3].Note = "the kernel did not build"
	ts[6].Culprit = true
	ts[6].Note = "median above the threshold in every sample"
	return &Document{
		Kind:       "run",
		Title:      "kbisect: " + hash(6)[:12] + " is the first bad commit (system-0)",
		Result:     "found",
		Summary:    []string{"The first bad commit is " + hash(6)[:12] + " locking: spin in the tick.", "Noise went from 3.2 µs to 49 ms per period."},
		Machine:    "system-0",
		Command:    `kbisect run --good v6.12.70 --bad v6.12.78 --metric noise --threshold 1ms`,
		BootParams: "isolcpus=1-32 nohz_full=1-32 rcu_nocbs=1-32",
		Config:     []string{"base: /boot/config-6.12.70", "fragment: rt.config", "CONFIG_PREEMPT_RT=y"},
		Metric:     Metric{Name: "noise", Label: "noise per period", Kind: "time", Threshold: 1e6, HasThreshold: true, HigherIsBad: true},
		Tested:     ts,
		AB:         abComparison(32),
		Text:       "CPU  noise  <max>\n  1  49 ms  & more\n",
		Generated:  "2025-01-02T03:04:05Z",
	}
}

// abComparison is the culprit against its revert on cpus CPUs.
func abComparison(cpus int) *AB {
	a := Side{Name: "A: v6.12.78", Commit: strings.Repeat("ab", 20), Values: spread(49e6, 10)}
	b := Side{Name: "B: v6.12.78 with 06a1b2c3d4e5 reverted", Commit: strings.Repeat("cd", 20), Values: spread(3000, 10)}
	for c := 1; c <= cpus; c++ {
		a.PerCPU = append(a.PerCPU, CPUValue{CPU: c, Value: 49e6 + float64(c)*1e4})
		b.PerCPU = append(b.PerCPU, CPUValue{CPU: c, Value: 3000 + float64(c)*10})
	}
	return &AB{
		A: a, B: b,
		Conclusion: "B is 16,000× less noisy than A on all 32 CPUs, p < 0.001",
		P:          0.0001, Shift: -49e6, ShiftLow: -50e6, ShiftHigh: -48e6,
		Confidence: 0.95, Significant: true,
	}
}

func abDocument() *Document {
	d := bisectionDocument()
	d.Kind, d.Result, d.Tested = "ab", "different", nil
	d.Title = "kbisect: B is less noisy than A (system-0)"
	return d
}

func renderHTML(t *testing.T, d *Document) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

var svgElement = regexp.MustCompile(`(?s)<svg\b.*?</svg>`)

// svgs are the SVG elements of a page, by id.
func svgs(t *testing.T, page string) map[string]string {
	t.Helper()
	byID := map[string]string{}
	for _, s := range svgElement.FindAllString(page, -1) {
		m := regexp.MustCompile(`^<svg[^>]*\bid="([^"]+)"`).FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("an SVG has no id: %.200s", s)
		}
		byID[m[1]] = s
	}
	return byID
}

func TestHTMLOfABisectionWithComparisonDrawsThreeWellFormedPlots(t *testing.T) {
	plots := svgs(t, renderHTML(t, bisectionDocument()))
	for _, id := range []string{"plot-bisection", "plot-ab-cpus", "plot-ab-samples"} {
		s, ok := plots[id]
		if !ok {
			t.Errorf("no plot %q", id)
			continue
		}
		dec := xml.NewDecoder(strings.NewReader(s))
		for {
			_, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Errorf("plot %q is not well-formed XML: %v", id, err)
				break
			}
		}
		if !strings.Contains(s, "<title>") || !strings.Contains(s, `aria-label="`) {
			t.Errorf("plot %q has no title or aria-label for screen readers", id)
		}
	}
	if len(plots) != 3 {
		t.Errorf("%d plots, want 3", len(plots))
	}
}

func TestHTMLFetchesNothing(t *testing.T) {
	page := renderHTML(t, bisectionDocument())
	rest := strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
	for _, ref := range []string{"http://", "https://", "<script", "<link", "url(", "@import", "<img", "<iframe"} {
		if i := strings.Index(rest, ref); i >= 0 {
			t.Errorf("the page refers outside itself with %q: …%s…", ref, rest[max(0, i-80):min(len(rest), i+80)])
		}
	}
}

func TestHTMLEscapesCommitSubjectsAndReportText(t *testing.T) {
	page := renderHTML(t, bisectionDocument())
	for _, raw := range []string{"<script>alert(1)</script>", `& "x"`, "<max>"} {
		if strings.Contains(page, raw) {
			t.Errorf("%q appears unescaped", raw)
		}
	}
	// Both the table and the plot's tooltip carry the subject.
	if n := strings.Count(page, "&lt;script&gt;alert(1)&lt;/script&gt;"); n < 2 {
		t.Errorf("the escaped subject appears %d times, want the table and the plot", n)
	}
	if !strings.Contains(page, "&lt;max&gt;") {
		t.Error("the plain-text report is missing or not escaped")
	}
}

func TestBisectionPlotIsLogarithmicAndShowsThresholdCulpritAndUnits(t *testing.T) {
	plot := svgs(t, renderHTML(t, bisectionDocument()))["plot-bisection"]
	for _, want := range []string{"threshold 1 ms", "(log scale)", "first bad", ">1 µs<", ">100 ms<", "drm: does not build"} {
		if !strings.Contains(plot, want) {
			t.Errorf("the bisection plot lacks %q", want)
		}
	}
}

func TestHTMLShowsTheSetupToReproduce(t *testing.T) {
	page := renderHTML(t, bisectionDocument())
	for _, want := range []string{
		"kbisect run --good v6.12.70 --bad v6.12.78 --metric noise --threshold 1ms",
		"isolcpus=1-32 nohz_full=1-32 rcu_nocbs=1-32",
		"CONFIG_PREEMPT_RT=y", "system-0", "Noise went from 3.2 µs to 49 ms per period.",
		"2025-01-02T03:04:05Z", `class="result bad"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

func TestHTMLOfABOnlyHasNoBisectionPlot(t *testing.T) {
	plots := svgs(t, renderHTML(t, abDocument()))
	if _, ok := plots["plot-bisection"]; ok {
		t.Error("an A/B report draws a bisection")
	}
	if _, ok := plots["plot-ab-cpus"]; !ok {
		t.Error("an A/B report lacks its per-CPU plot")
	}
}

func TestHTMLOfRunOnlyHasNoABPlots(t *testing.T) {
	d := bisectionDocument()
	d.AB = nil
	plots := svgs(t, renderHTML(t, d))
	if len(plots) != 1 || plots["plot-bisection"] == "" {
		t.Errorf("plots %v, want only plot-bisection", keys(plots))
	}
}

func TestHTMLWithoutPerCPUValuesHasNoCPUPlot(t *testing.T) {
	d := abDocument()
	d.AB.A.PerCPU, d.AB.B.PerCPU = nil, nil
	plots := svgs(t, renderHTML(t, d))
	if _, ok := plots["plot-ab-cpus"]; ok {
		t.Error("a per-CPU plot without per-CPU values")
	}
	if _, ok := plots["plot-ab-samples"]; !ok {
		t.Error("the samples plot went missing with the per-CPU values")
	}
}

func TestCPUPlotOf64CPUsLabelsOnlySomeCPUs(t *testing.T) {
	d := abDocument()
	d.AB = abComparison(64)
	plot := svgs(t, renderHTML(t, d))["plot-ab-cpus"]
	labels := regexp.MustCompile(`>(\d+)</text>`).FindAllStringSubmatch(plot, -1)
	if len(labels) == 0 || len(labels) > 32 {
		t.Errorf("%d CPU labels for 64 CPUs, want a readable few", len(labels))
	}
	if n := strings.Count(plot, "<rect") - 1; n != 128 { // less the background
		t.Errorf("%d bars, want 128", n)
	}
}

func TestHTMLIsTheSameEveryTime(t *testing.T) {
	if renderHTML(t, bisectionDocument()) != renderHTML(t, bisectionDocument()) {
		t.Error("two renderings of one document differ")
	}
}

func TestWriteRefusesNoDocument(t *testing.T) {
	if err := WriteHTML(io.Discard, nil); err == nil {
		t.Error("WriteHTML(nil) succeeded")
	}
	if err := WriteJUnit(io.Discard, nil); err == nil {
		t.Error("WriteJUnit(nil) succeeded")
	}
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestMetricFormatPicksReadableUnits(t *testing.T) {
	for _, c := range []struct {
		kind string
		v    float64
		want string
	}{
		{"time", 0, "0 ns"},
		{"time", 850, "850 ns"},
		{"time", 3100, "3.1 µs"},
		{"time", 52725000, "52.7 ms"},
		{"time", 999.7, "1 µs"},
		{"time", -49e6, "-49 ms"},
		{"time", 3_600e9, "3,600 s"},
		{"count", 6864, "6,864"},
		{"count", 0, "0"},
		{"percent", 94.8, "94.8 %"},
		{"percent", 99.981, "99.98 %"},
		{"percent", 0.004, "0.004 %"},
		{"number", 1234567, "1,234,567"},
		{"number", 0.125, "0.125"},
		{"number", math.NaN(), "n/a"},
	} {
		if got := (Metric{Kind: c.kind}).Format(c.v); got != c.want {
			t.Errorf("%s %v = %q, want %q", c.kind, c.v, got, c.want)
		}
	}
}

func TestLinearAxisWritesAllTicksInOneUnit(t *testing.T) {
	a := newAxis("time", []float64{0, 2.4e6}, true, 100, 0)
	var got []string
	for _, tick := range a.ticks() {
		got = append(got, a.label(tick))
	}
	want := "0 ms|0.5 ms|1 ms|1.5 ms|2 ms|2.5 ms"
	if a.log || strings.Join(got, "|") != want {
		t.Errorf("ticks %q (log %v), want %q", got, a.log, want)
	}
}

func TestLogAxisDrawsZeroAtTheSmallestPositiveValue(t *testing.T) {
	a := newAxis("time", []float64{0, 3000, 50e6}, false, 100, 0)
	if !a.log {
		t.Fatal("3 µs to 50 ms is drawn linear")
	}
	if a.pos(0) != a.pos(3000) || a.pos(-5) != a.pos(3000) {
		t.Errorf("zero at %v and -5 at %v, want both at 3 µs's %v", a.pos(0), a.pos(-5), a.pos(3000))
	}
	if a.lo != 1000 || a.hi != 1e8 {
		t.Errorf("domain %v..%v, want the decades 1 µs..100 ms", a.lo, a.hi)
	}
}

// The JUnit schema as a CI system reads it, independent of the writer's.
type parsedSuites struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Skipped  int `xml:"skipped,attr"`
	Suites   []struct {
		Name      string `xml:"name,attr"`
		Tests     int    `xml:"tests,attr"`
		Failures  int    `xml:"failures,attr"`
		Skipped   int    `xml:"skipped,attr"`
		SystemOut string `xml:"system-out"`
		Cases     []struct {
			Classname string `xml:"classname,attr"`
			Name      string `xml:"name,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
			} `xml:"failure"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			SystemOut string `xml:"system-out"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func renderJUnit(t *testing.T, d *Document) parsedSuites {
	t.Helper()
	var b bytes.Buffer
	if err := WriteJUnit(&b, d); err != nil {
		t.Fatal(err)
	}
	var p parsedSuites
	if err := xml.Unmarshal(b.Bytes(), &p); err != nil {
		t.Fatalf("the JUnit does not parse: %v\n%s", err, b.String())
	}
	if len(p.Suites) != 1 {
		t.Fatalf("%d suites, want 1", len(p.Suites))
	}
	return p
}

func TestJUnitOfABisectionFailsBadCommitsAndSkipsUntestable(t *testing.T) {
	p := renderJUnit(t, bisectionDocument())
	s := p.Suites[0]
	// 10 commits and, for the confirming A/B, 2 sides and the comparison;
	// a difference is what confirmation expects, so only the 4 bad
	// commits fail.
	if s.Tests != 13 || s.Failures != 4 || s.Skipped != 1 || p.Tests != 13 || p.Failures != 4 || p.Skipped != 1 {
		t.Errorf("suite tests/failures/skipped %d/%d/%d (all %d/%d/%d), want 13/4/1",
			s.Tests, s.Failures, s.Skipped, p.Tests, p.Failures, p.Skipped)
	}
	if !strings.HasPrefix(s.Name, "kbisect ") {
		t.Errorf("suite name %q", s.Name)
	}
	culprit := s.Cases[6]
	if culprit.Classname != "kbisect.bisect" || culprit.Name != "06a1b2c3d4e5 locking: spin in the tick" {
		t.Errorf("culprit case %q %q", culprit.Classname, culprit.Name)
	}
	if culprit.Failure == nil {
		t.Fatal("the culprit passes")
	}
	d := bisectionDocument()
	for _, want := range []string{"first bad commit", "median " + d.Metric.Format(d.Tested[6].Median), "threshold 1 ms"} {
		if !strings.Contains(culprit.Failure.Message, want) {
			t.Errorf("culprit message %q lacks %q", culprit.Failure.Message, want)
		}
	}
	if s.Cases[7].Failure == nil || strings.Contains(s.Cases[7].Failure.Message, "first bad") {
		t.Errorf("a later bad commit: %+v", s.Cases[7].Failure)
	}
	if s.Cases[3].Skipped == nil || !strings.Contains(s.Cases[3].Skipped.Message, "did not build") {
		t.Errorf("the skip: %+v", s.Cases[3].Skipped)
	}
	if s.Cases[4].Name != "04a1b2c3d4e5 "+hostile {
		t.Errorf("the hostile subject came back as %q", s.Cases[4].Name)
	}
	if s.SystemOut != d.Text {
		t.Errorf("suite system-out %q, want the plain report", s.SystemOut)
	}
}

func TestJUnitOfABFailsTheComparisonOnlyWhenTheKernelsDiffer(t *testing.T) {
	d := abDocument()
	s := renderJUnit(t, d).Suites[0]
	if s.Tests != 3 || s.Failures != 1 {
		t.Fatalf("tests/failures %d/%d, want 3/1", s.Tests, s.Failures)
	}
	if s.Cases[0].Name != d.AB.A.Name || s.Cases[1].Name != d.AB.B.Name || s.Cases[0].Classname != "kbisect.ab" {
		t.Errorf("side cases %q, %q", s.Cases[0].Name, s.Cases[1].Name)
	}
	c := s.Cases[2]
	if c.Name != "comparison" || c.Failure == nil || c.Failure.Message != d.AB.Conclusion {
		t.Errorf("comparison case %+v, want a failure with the conclusion", c)
	}

	d.AB.Significant, d.AB.Conclusion = false, "no difference between A and B, p = 0.4"
	s = renderJUnit(t, d).Suites[0]
	c = s.Cases[2]
	if s.Failures != 0 || c.Failure != nil || !strings.Contains(c.SystemOut, d.AB.Conclusion) {
		t.Errorf("failures %d, comparison %+v: want a pass carrying the conclusion", s.Failures, c)
	}
}

func ExampleMetric_Format() {
	noise := Metric{Kind: "time"}
	fmt.Println(noise.Format(850), noise.Format(3100), noise.Format(52725000))
	fmt.Println(Metric{Kind: "count"}.Format(6864), Metric{Kind: "percent"}.Format(94.8))
	// Output:
	// 850 ns 3.1 µs 52.7 ms
	// 6,864 94.8 %
}

func TestAFailedCheckIsAJUnitFailureAndShowsInTheHTML(t *testing.T) {
	d := &Document{Kind: "run", Title: "t", Result: "found", Checks: []Check{
		{Name: "confirmation", Failure: "the first bad commit is NOT confirmed <b>", Detail: "flag"},
		{Name: "other"},
	}}
	var j, h strings.Builder
	if err := WriteJUnit(&j, d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(j.String(), `tests="2" failures="1"`) || !strings.Contains(j.String(), `classname="kbisect.check" name="confirmation"`) {
		t.Errorf("junit:\n%s", j.String())
	}
	if err := WriteHTML(&h, d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.String(), "NOT confirmed &lt;b&gt;") || strings.Contains(h.String(), "other:") {
		t.Errorf("html shows the checks wrongly")
	}
}

func TestFromStateRefusesAFormatItDoesNotWriteBeforeReadingTheState(t *testing.T) {
	err := FromState(context.Background(), t.TempDir(), "pdf", io.Discard)
	if !usage.Is(err) || err.Error() != `report --format "pdf": give text, markdown, json, html or junit` {
		t.Errorf("%v", err)
	}
}
