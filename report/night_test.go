package report

import (
	"bytes"
	"encoding/json"
	"kbisect/verdict"
	"strings"
	"testing"
	"time"
)

// microseconds words a time the way a text report might, to tell it
// from the HTML report's wording.
// stableHistory is a machine's history on a stable branch: a good
// release, a bad one that opened an incident bisected to a commit, and
// the release that fixed it.
func stableHistory() History {
	at := time.Date(2026, 11, 30, 1, 15, 0, 0, time.Local)
	row := func(tag, v string, median float64, baseline string) HistoryMeasurement {
		return HistoryMeasurement{Tag: tag, Commit: strings.Repeat(tag[len(tag)-1:], 40), Metric: "noise", Kind: "time",
			Values: []float64{median * 0.9, median, median * 1.2}, Median: median, Threshold: 1e6, Verdict: verdict.Verdict(v),
			Reason: v + " | why", Baseline: baseline, MeasuredAt: at}
	}
	return History{Machine: "system-0", Trees: []HistoryTree{{Remote: "https://git.example.org/stable.git", Branch: "linux-6.12.y",
		Measurements: []HistoryMeasurement{row("v6.12.57", "good", 13e3, ""), row("v6.12.58", "bad", 49e6, "v6.12.57"),
			row("v6.12.59", "good", 14e3, "v6.12.57")},
		Incidents: []Incident{{ID: 1, LastGood: "v6.12.57", FirstBad: "v6.12.58", Result: "found", Commit: strings.Repeat("ab", 20),
			Subject: "sched: spin in the tick", StateDir: "/lab/incident-v6.12.57..v6.12.58", ClosedTag: "v6.12.59"}}}}}
}

func TestHistoryText(t *testing.T) {
	var b bytes.Buffer
	WriteHistoryText(&b, stableHistory())
	want := `system-0, linux-6.12.y of https://git.example.org/stable.git:
  v6.12.57         2026-11-30 01:15  good           13 µs (threshold 1,000 µs)
  v6.12.58         2026-11-30 01:15  bad        49,000 µs (threshold 1,000 µs) against v6.12.57  <- incident 1
  v6.12.59         2026-11-30 01:15  good           14 µs (threshold 1,000 µs) against v6.12.57
  incident 1: v6.12.57 good, v6.12.58 bad: first bad commit abababababab "sched: spin in the tick"; fixed in v6.12.59
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	WriteHistoryText(&b, History{Machine: "system-1"})
	if b.String() != "system-1: nothing measured yet (kbisect nightly fills the history)\n" {
		t.Errorf("an empty history: %q", b.String())
	}
}

func TestIncidentCulprit(t *testing.T) {
	for _, c := range []struct {
		i    Incident
		want string
	}{
		{Incident{Result: "found", Commit: strings.Repeat("ab", 20), Subject: `a "quoted" subject`}, `first bad commit abababababab "a \"quoted\" subject"`},
		{Incident{}, "not bisected"},
		{Incident{Result: "inconclusive"}, "bisection inconclusive"},
	} {
		if got := c.i.Culprit(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.i, got, c.want)
		}
	}
}

// TestHistoryJSONKeepsItsShape: the fields history --format json has
// always had, empty lists as lists.
func TestHistoryJSONKeepsItsShape(t *testing.T) {
	var b bytes.Buffer
	h := History{Machine: "system-0", Trees: []HistoryTree{{Remote: "/src/linux", Measurements: []HistoryMeasurement{}, Incidents: []Incident{}}}}
	if err := WriteHistoryJSON(&b, h); err != nil {
		t.Fatal(err)
	}
	want := `{
  "machine": "system-0",
  "trees": [
    {
      "remote": "/src/linux",
      "measurements": [],
      "incidents": []
    }
  ]
}
`
	if b.String() != want {
		t.Errorf("got\n%s", b.String())
	}
	b.Reset()
	if err := WriteHistoryJSON(&b, stableHistory()); err != nil {
		t.Fatal(err)
	}
	var back History
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || len(back.Trees[0].Measurements) != 3 || back.Trees[0].Incidents[0].Commit != strings.Repeat("ab", 20) {
		t.Errorf("%v: %+v", err, back)
	}
}

func regressionNight() *Night {
	h := stableHistory()
	h.Trees[0].Measurements = h.Trees[0].Measurements[:2]
	h.Trees[0].Incidents[0].ClosedTag = ""
	return &Night{Machine: "system-0", Result: "regression", Message: "system-0: a regression between v6.12.57 (good) and v6.12.58 (bad)\nreports in /lab",
		Metric: "noise", Kind: "time", Measured: h.Trees[0].Measurements[1:], History: h,
		Generated: time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)}
}

func TestNightTextAndMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := WriteNightText(&b, regressionNight()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kbisect nightly: system-0: regression\n\nsystem-0: a regression between",
		"Measured tonight (noise: the median of the samples):\n  v6.12.58         bad        49,000 µs  against v6.12.57\n\nsystem-0, linux-6.12.y of",
		"<- incident 1\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := WriteNightMarkdown(&b, regressionNight()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## kbisect nightly: system-0: regression\n\n", "(bad)  \nreports in /lab  \n",
		"| v6.12.58 | bad | 49,000 µs | v6.12.57 | bad \\| why |\n", "### History\n\n```\nsystem-0, "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the markdown lacks %q:\n%s", want, b.String())
		}
	}
}

// TestNightJUnitFailsTheMachinesCase: the bad release fails, and so does
// the machine's case on a regression, but not on a night that is all
// well.
func TestNightJUnitFailsTheMachinesCase(t *testing.T) {
	var b bytes.Buffer
	if err := WriteNightJUnit(&b, regressionNight()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`tests="2" failures="2"`, `name="no regression on system-0"`,
		`<failure message="regression: system-0: a regression between v6.12.57 (good) and v6.12.58 (bad)" type="check">`,
		`name="888888888888 v6.12.58"`, `against v6.12.57: bad | why`, `value="2026-11-30T02:00:00Z"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the JUnit lacks %s:\n%s", want, b.String())
		}
	}
	n := regressionNight()
	n.Result, n.Measured = "nothing-new", nil
	b.Reset()
	if err := WriteNightJUnit(&b, n); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `tests="1" failures="0"`) {
		t.Errorf("a quiet night:\n%s", b.String())
	}
}

func TestNightHTMLIsTheHistoryHeadedByTheNight(t *testing.T) {
	var b bytes.Buffer
	if err := WriteNightHTML(&b, regressionNight()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kbisect nightly: system-0: regression", "History at a glance", "<svg", "reports in /lab"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	b.Reset()
	if err := WriteHistoryHTML(&b, stableHistory(), "noise", time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kbisect history: system-0", "incident 1: v6.12.57 good, v6.12.58 bad, first bad commit", "fixed in v6.12.59"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the history page lacks %q", want)
		}
	}
}
