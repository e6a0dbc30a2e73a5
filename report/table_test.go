package report

import (
	"bytes"
	"kbisect/noise"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTablesKeepTheMailLayoutWithUnits(t *testing.T) {
	m, err := noise.Parse(noise.ToolOsnoise, noiseFixture(t, "seed-000-spinlock-table.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, m); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "CPU PERIODS RUNTIME(us) NOISE(us) AVAIL% MAX_SINGLE(us) HW NMI IRQ SIRQ THREAD" {
		t.Errorf("header %q", lines[0])
	}
	// The seed's "[001] 950000 50163 94.719% 14 0 6864 0 5922", columns
	// named for what they hold; HW was not in the seed's table.
	if got := strings.Join(strings.Fields(lines[1]), " "); got != "[001] 1 950000 50163 94.71968 14 - 0 6864 0 5922" {
		t.Errorf("row %q", got)
	}
	for _, want := range []string{
		"max single noise: worst 20 µs (CPU 16), median CPU 14 µs",
		"IRQ count per period: worst 6,864 (CPU 1), median CPU 6,864",
		"CPU availability: worst 94.705% (CPU 4), median CPU 94.773%",
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := WriteTableMarkdown(&b, m); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "| CPU | PERIODS | RUNTIME(us) |") || !strings.Contains(b.String(), "| [016] | 1 | 950000 | 48551 | 94.88936 | 20 | - | 0 | 6863 | 19 | 5942 |\n") {
		t.Errorf("markdown:\n%s", b.String())
	}
}

func TestLatencyTablesNameWhichLatency(t *testing.T) {
	m, err := noise.Parse(noise.ToolRtlaTimerlat, noiseFixture(t, "lab612rt-smp2-rtla-timerlat-top.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, m); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(strings.Fields(strings.SplitN(b.String(), "\n", 2)[0]), " "); got != "CPU IRQ_SAMPLES IRQ_MIN(us) IRQ_AVG(us) IRQ_MAX(us) THREAD_SAMPLES THREAD_MIN(us) THREAD_AVG(us) THREAD_MAX(us)" {
		t.Errorf("header %q", got)
	}
	if !strings.Contains(b.String(), "thread latency: worst 3,818 µs (CPU 1)") {
		t.Errorf("%s", b.String())
	}
	hist, err := noise.Parse(noise.ToolRtlaOsnoise, noiseFixture(t, "rtla-doc_osnoise-hist.txt"))
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := WriteTable(&b, hist); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(strings.Fields(strings.SplitN(b.String(), "\n", 2)[0]), " "); got != "CPU NOISE_SAMPLES NOISE_MIN(us) NOISE_AVG(us) NOISE_MAX(us)" {
		t.Errorf("a histogram of single noises: header %q", got)
	}
}

// noiseFixture is a real tool output kept with the parsers' tests.
func noiseFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "noise", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestABSummaryHasBothSidesTheComparisonAndTheConclusion(t *testing.T) {
	side := func(name, file string) noise.Side {
		m, err := noise.Parse(noise.ToolOsnoise, noiseFixture(t, file))
		if err != nil {
			t.Fatal(err)
		}
		return noise.Side{Name: name, Samples: []*noise.Measurement{m, m, m, m, m}}
	}
	r, err := noise.CompareAB(side("spinlock", "seed-000-spinlock-table.txt"), side("rwlock", "seed-000-rwlock-table.txt"), "noise", "max", 0.95)
	if err != nil {
		t.Fatal(err)
	}
	var text, md bytes.Buffer
	if err := WriteABSummary(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteABSummaryMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(text.String()), " ")
	for _, want := range []string{"Summary across all measured CPUs (", "5 and 5 samples):", "A: spinlock", "B: rwlock", "IRQ count per period:", "6,864", "Mann-Whitney", r.Conclusion} {
		if !strings.Contains(flat, strings.Join(strings.Fields(want), " ")) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if !strings.Contains(md.String(), "| | A: spinlock | B: rwlock |\n|---|---:|---:|\n") || !strings.Contains(md.String(), "- "+r.Conclusion+"\n") {
		t.Errorf("markdown:\n%s", md.String())
	}
}
