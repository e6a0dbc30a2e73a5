package progress

import (
	"bytes"
	"kbisect/verdict"
	"regexp"
	"strings"
	"testing"
	"time"
)

const commit = "0123456789abcdef0123456789abcdef01234567"

func step() []Event {
	return []Event{
		{Kind: Line, Text: "calibrating on the endpoints"},
		{Kind: Testing, Commit: commit, Subject: "eventpoll: Replace rwlock with spinlock", Step: Step{Left: 6, Estimate: 3}},
		{Kind: Phase, Commit: commit, Phase: "build", Text: "from the cache"},
		{Kind: Phase, Commit: commit, Phase: "boot"},
		{Kind: Phase, Commit: commit, Phase: "measure", Sample: 1, Value: "49 ms"},
		{Kind: Note, Commit: commit, Text: "building ahead"},
		{Kind: Tested, Commit: commit, Verdict: verdict.Bad, Text: "median 49 ms over 15 ms", Elapsed: 75 * time.Second},
		{Kind: Warning, Text: "a merge base"},
		{Kind: Done},
	}
}

func TestLinesAreTimeStampedOneAnEventThroughSlog(t *testing.T) {
	var b bytes.Buffer
	v := NewLines(&b)
	for _, e := range step() {
		v.Emit(e)
	}
	stamp := regexp.MustCompile(`^\d\d:\d\d:\d\d `)
	var got []string
	for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if strings.HasPrefix(l, "[") {
			got = append(got, l) // the second line of a step
			continue
		}
		if !stamp.MatchString(l) {
			t.Errorf("no time stamp: %q", l)
		}
		got = append(got, stamp.ReplaceAllString(l, ""))
	}
	want := []string{
		"calibrating on the endpoints",
		"Bisecting: 6 revisions left to test after this (roughly 3 steps)",
		"[" + commit + "] eventpoll: Replace rwlock with spinlock",
		"0123456789ab build: from the cache",
		"0123456789ab boot",
		"0123456789ab sample 1: 49 ms",
		"0123456789ab building ahead",
		"0123456789ab is bad (median 49 ms over 15 ms, 1:15)",
		"warning: a merge base",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Contains(b.String(), "\r") || strings.Contains(b.String(), "\033") {
		t.Errorf("control characters off a terminal: %q", b.String())
	}
}

func TestTerminalRedrawsOneStatusLineAndClearsItAtTheEnd(t *testing.T) {
	var b bytes.Buffer
	v := NewTerminal(&b)
	clock := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	v.now, v.start = func() time.Time { return clock }, clock
	for _, e := range step()[:5] {
		clock = clock.Add(10 * time.Second)
		v.Emit(e)
	}
	out := b.String()
	for _, s := range []string{
		"Bisecting: 6 revisions left",
		"\r\033[K[step 1/~4] measure 0123456789ab eventpoll: Replace rwlock with spinlock | 1 sample, last 49 ms | 0:50",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("the terminal lacks %q:\n%q", s, out)
		}
	}
	if strings.Contains(out, "sample 1: 49 ms") || strings.Contains(out, "0123456789ab boot\n") {
		t.Errorf("a terminal shows samples and phases on the status line only:\n%q", out)
	}
	for _, e := range step()[5:] {
		v.Emit(e)
	}
	if strings.Contains(b.String(), "building ahead") {
		t.Error("a note beside the step is printed on a terminal")
	}
	if !strings.HasSuffix(b.String(), "\r\033[K") {
		t.Errorf("the status line is not cleared at the end: %q", b.String()[len(out):])
	}
	if !strings.Contains(b.String(), "ETA ") {
		t.Error("no ETA once a step took its time")
	}
}

func TestTerminalNamesALabelledCommitByItsLabel(t *testing.T) {
	var b bytes.Buffer
	v := NewTerminal(&b)
	v.Emit(Event{Kind: Phase, Commit: commit, Label: "B", Phase: "boot", Text: "retrying in 30s"})
	if out := b.String(); !strings.Contains(out, "B 0123456789ab boot: retrying in 30s\n") || !strings.Contains(out, "[B] boot    0123456789ab") {
		t.Errorf("%q", out)
	}
}

func TestGitLinesAreGitBisectRunsWithoutTimes(t *testing.T) {
	var b bytes.Buffer
	g := NewGit(&b)
	for _, e := range step() {
		g.Emit(e)
	}
	g.Emit(Event{Kind: Testing, Commit: commit, Step: Step{MergeBase: true}})
	g.Emit(Event{Kind: Testing, Commit: commit, Subject: "s", Step: Step{Run: 2, Probability: 0.4213}})
	g.Emit(Event{Kind: Tested, Commit: commit, Verdict: verdict.Bad, Text: "exit 1", Elapsed: time.Second, Step: Step{Run: 2}})
	want := "calibrating on the endpoints\n" +
		"Bisecting: 6 revisions left to test after this (roughly 3 steps)\n" +
		"[" + commit + "] eventpoll: Replace rwlock with spinlock\n" +
		"0123456789ab is bad (median 49 ms over 15 ms, 75.0s)\n" +
		"warning: a merge base\n" +
		"Bisecting: a merge base must be tested\n" +
		"[" + commit + "] \n" +
		"Running the test on 0123456789ab (run 2 of this commit; the most probable first bad commit is at 0.421)\n" +
		"[" + commit + "] s\n" +
		"0123456789ab failed (exit 1, 1.0s)\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestATracedCommandReadsAsShXShowsIt(t *testing.T) {
	for _, c := range []struct{ where, command, want string }{
		{"", "make -j2 bzImage", "+ make -j2 bzImage"},
		{"root@lab", "\nset -e\n\nkexec -l /boot/vmlinuz\n  kexec -e\n", "+ root@lab: set -e\n    kexec -l /boot/vmlinuz\n      kexec -e"},
	} {
		if got := CommandText(c.where, c.command); got != c.want {
			t.Errorf("CommandText(%q, %q) = %q, want %q", c.where, c.command, got, c.want)
		}
	}
}

// A search that forecasts its end (kbisect's posterior) has its step
// count and ETA from the forecast, not from git's numbers, and says it on
// the step's line, on a terminal and off one.
func TestAForecastGivesTheStepCountAndTheETA(t *testing.T) {
	f := Forecast{Boots: 18, BootsLow: 12, BootsHigh: 30, Seconds: 7800, SecondsLow: 6000, SecondsHigh: 10800}
	testing := Event{Kind: Testing, Commit: commit, Subject: "eventpoll: Replace rwlock with spinlock",
		Text: "Measuring boot 1 of this commit (7 boots so far; leading: 0123456789ab at 0.31)", Step: Step{Forecast: f}}
	const said = "Measuring boot 1 of this commit (7 boots so far; leading: 0123456789ab at 0.31); ~18 boots left (12–30), answer in 2 h 10 m (1 h 40 m – 3 h)"

	var b bytes.Buffer
	v := NewTerminal(&b)
	clock := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	v.now, v.start = func() time.Time { return clock }, clock
	v.Emit(testing)
	clock = clock.Add(10 * time.Minute)
	v.Emit(Event{Kind: Phase, Commit: commit, Phase: "boot"})
	out := b.String()
	for _, s := range []string{said + "\n", "[step 1/~18] boot    0123456789ab", "| 10:00, ETA 2:00:00 (1:30:00–2:50:00)"} {
		if !strings.Contains(out, s) {
			t.Errorf("the terminal lacks %q:\n%q", s, out)
		}
	}

	b.Reset()
	NewLines(&b).Emit(testing)
	if !strings.Contains(b.String(), said+"\n") {
		t.Errorf("the line off a terminal lacks the forecast: %q", b.String())
	}
	if got := (Forecast{Boots: 1, BootsLow: 1, BootsHigh: 1, Seconds: 40, SecondsLow: 40, SecondsHigh: 45}).String(); got != "~1 boot left, answer in 40 s (40 s – 45 s)" {
		t.Errorf("a last boot: %q", got)
	}
}
