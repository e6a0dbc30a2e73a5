package nightly

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/history"
	"kbisect/lab"
	"kbisect/verdict"
)

// release is a release tag as followedReleases finds it, its commit made
// up from the tag.
func release(tag string) bisect.Release {
	r, ok := bisect.ParseRelease(tag)
	if !ok {
		panic(tag)
	}
	r.Commit = plumbing.NewHash(strings.Repeat("0", 40-len(tag)) + strings.Map(func(c rune) rune { return 'a' + c%6 }, tag))
	return r
}

// releases are release tags, given and returned newest first.
func releases(tags ...string) []bisect.Release {
	var out []bisect.Release
	for _, t := range tags {
		out = append(out, release(t))
	}
	return out
}

func tags(rs []bisect.Release) string { return strings.Join(tagNames(rs), " ") }

// measured is a row of the history: the tag and its verdict, measured
// daysAgo days before now.
func measured(tag string, v verdict.Verdict, daysAgo int) history.Measurement {
	return history.Measurement{Tag: tag, Commit: tag + "-commit", Metric: "noise", Verdict: v, Values: []float64{float64(daysAgo)},
		MeasuredAt: now.Add(-time.Duration(daysAgo) * 24 * time.Hour)}
}

var now = time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)

// nightly is the baseline's row followed by the rows of n later nights,
// each a release that did not build, all dated like the baseline (the
// clock went back each night).
func nightly(base history.Measurement, n int) []history.Measurement {
	base.Night = "night-0"
	out := []history.Measurement{base}
	for i := 1; i <= n; i++ {
		m := measured(fmt.Sprintf("v6.12.%d", 57+i), verdict.Skip, 1)
		m.Night = fmt.Sprintf("night-%d", i)
		out = append(out, m, m) // two rows of one night count once
	}
	return out
}

// TestTheBaselineIsMeasuredAgainWhenItCannotBeTrusted: the newest good
// release is the baseline; it is stale when older than the job allows,
// when its newest measurement is not good (a drift), or when it was
// measured on another metric.
func TestTheBaselineIsMeasuredAgainWhenItCannotBeTrusted(t *testing.T) {
	row := measured
	week := 7 * 24 * time.Hour
	for _, c := range []struct {
		name   string
		past   []history.Measurement
		metric string
		want   string // tag, and "stale: why" when stale
	}{
		{"none", []history.Measurement{row("v6.12.57", "bad", 1)}, "noise", ""},
		{"fresh", []history.Measurement{row("v6.12.56", "good", 9), row("v6.12.57", "good", 2), row("v6.12.58", "bad", 1)}, "noise", "v6.12.57"},
		{"old", []history.Measurement{row("v6.12.57", "good", 9)}, "noise", "v6.12.57 stale: measured 9 days ago, longer than nightly.baseline_max_age (7d)"},
		{"drifted", []history.Measurement{row("v6.12.57", "good", 2), row("v6.12.58", "drift", 1), row("v6.12.57", "drift", 1)}, "noise",
			"v6.12.57 stale: its last measurement (" + now.Add(-24*time.Hour).Local().Format("2006-01-02 15:04") + ") was drift"},
		{"drift ended", []history.Measurement{row("v6.12.57", "good", 2), row("v6.12.57", "drift", 1), row("v6.12.58", "drift", 1),
			row("v6.12.57", "good", 0), row("v6.12.58", "good", 0)}, "noise", "v6.12.58"},
		{"metric", []history.Measurement{row("v6.12.57", "good", 1)}, "max_single", "v6.12.57 stale: it was measured on noise, and the job now judges max_single"},
		// The clock was set a month ahead the night the baseline was
		// measured: by its date it is fresh for five more weeks.
		{"dated in the future", []history.Measurement{row("v6.12.57", "good", -30)}, "noise",
			"v6.12.57 stale: its measurement is dated " + now.Add(30*24*time.Hour).Local().Format("2006-01-02 15:04") +
				", after this night began (" + now.Local().Format("2006-01-02 15:04") + "): the clock jumped, so its age is unknown"},
		// The clock jumped back: a day old by its date, but seven nights
		// have measured since.
		{"nights since", nightly(row("v6.12.57", "good", 1), 7), "noise",
			"v6.12.57 stale: 7 nights have measured since it, as many as nightly.baseline_max_age (7d) has days, though its date says 24h0m0s ago: the clock jumped"},
		{"six nights since", nightly(row("v6.12.57", "good", 1), 6), "noise", "v6.12.57"},
	} {
		b := baselineOf(c.past, c.metric, week, now)
		got := ""
		if b != nil {
			got = b.tag
			if b.stale {
				got += " stale: " + b.why
			}
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	drift := []history.Measurement{row("v6.12.57", "good", 2), row("v6.12.57", "drift", 1), row("v6.12.58", "drift", 1)}
	drift[2].Baseline = "v6.12.57"
	if got := unjudgedRelease(drift); got != "v6.12.58" {
		t.Errorf("drifted release %q", got)
	}
	if got := unjudgedRelease(append(drift, row("v6.12.57", "good", 0), row("v6.12.58", "good", 0))); got != "" {
		t.Errorf("after the drift ended: %q", got)
	}
	unsure := append(drift[:1:1], row("v6.12.58", "skip", 1))
	if got := unjudgedRelease(unsure); got != "" {
		t.Errorf("a release that does not build is judged again: %q", got)
	}
	unsure[1].Baseline = "v6.12.57"
	if got := unjudgedRelease(unsure); got != "v6.12.58" {
		t.Errorf("a release unsure beside its baseline: %q", got)
	}
}

// TestNewReleasesAreThoseNewerThanAnyMeasured: a tag older than the
// newest measured one is history, even when it was never measured.
func TestNewReleasesAreThoseNewerThanAnyMeasured(t *testing.T) {
	followed := releases("v6.12.60", "v6.12.59", "v6.12.58", "v6.12.57")
	for _, c := range []struct {
		name string
		past []history.Measurement
		want string
	}{
		{"first night", nil, "v6.12.60 v6.12.59 v6.12.58 v6.12.57"},
		{"two new", []history.Measurement{measured("v6.12.58", "good", 1)}, "v6.12.60 v6.12.59"},
		{"an older one never measured", []history.Measurement{measured("v6.12.59", "good", 1)}, "v6.12.60"},
		{"nothing new", []history.Measurement{measured("v6.12.57", "good", 2), measured("v6.12.60", "bad", 1)}, ""},
	} {
		if got := tags(newReleases(followed, c.past)); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestPendingRegressionIsWhatAStoppedNightLeft: bad releases newer than
// the newest good one, in version order whatever order they were
// measured in.
func TestPendingRegressionIsWhatAStoppedNightLeft(t *testing.T) {
	for _, c := range []struct {
		name      string
		past      []history.Measurement
		good, bad string
	}{
		{"none", nil, "", ""},
		{"all good", []history.Measurement{measured("v6.12.57", "good", 2), measured("v6.12.58", "good", 1)}, "v6.12.58", ""},
		{"bad, then good below it", []history.Measurement{measured("v6.12.57", "good", 3), measured("v6.12.60", "bad", 1),
			measured("v6.12.59", "bad", 1), measured("v6.12.58", "good", 1)}, "v6.12.58", "v6.12.59"},
		{"skips do not count", []history.Measurement{measured("v6.12.57", "good", 2), measured("v6.12.59", "bad", 1),
			measured("v6.12.58", "skip", 1)}, "v6.12.57", "v6.12.59"},
		{"no good one", []history.Measurement{measured("v6.12.59", "bad", 1)}, "", "v6.12.59"},
	} {
		if good, bad := pendingRegression(c.past); good != c.good || bad != c.bad {
			t.Errorf("%s: %q, %q; want %q, %q", c.name, good, bad, c.good, c.bad)
		}
	}
}

// TestPairVerdicts: a release judged beside its baseline is bad only
// beside a good baseline; beside a bad one it is the machine's drift,
// beside a doubtful one it is not judged. Under a ratio the baseline is
// the reference: the release is good when no worse, bad when the rule
// says so, and unsure in between.
func TestPairVerdicts(t *testing.T) {
	job := func(threshold string) *configs.Job {
		t.Helper()
		th, err := configs.ParseThreshold(threshold)
		if err != nil {
			t.Fatal(err)
		}
		return &configs.Job{Workload: configs.Workload{Tool: "osnoise"}, Verdict: configs.Verdict{Metric: "noise", Aggregate: "max", Threshold: th,
			Samples: configs.Samples{Min: 3, Max: 10}, Confidence: 0.95}}
	}
	ev := func(values ...float64) *lab.Evidence {
		return &lab.Evidence{Values: values, Metric: "noise", Kind: "time"}
	}
	us := func(v float64) float64 { return v * 1000 }
	quiet := []float64{us(13), us(14), us(12), us(15), us(13), us(14), us(13), us(12), us(14), us(13)}
	storm := []float64{us(49000), us(51000), us(50500), us(52000), us(49500), us(50000), us(51500), us(50200), us(49800), us(50900)}
	border := []float64{us(30), us(48), us(34), us(44), us(38), us(33), us(46), us(36), us(41), us(45)}
	near := []float64{us(900), us(1100), us(950), us(1050), us(1000), us(980), us(1020), us(990), us(1010), us(1005)}
	for _, c := range []struct {
		name, threshold      string
		base, release        []float64
		wantBase, wantRelase verdict.Verdict
	}{
		{"regression", "1ms", quiet, storm, "good", "bad"},
		{"quiet", "1ms", quiet, quiet, "good", "good"},
		{"drift", "1ms", storm, storm, "drift", "drift"},
		{"baseline in doubt", "1ms", near, storm, "skip", "skip"},
		{"ratio regression", "3x", quiet, storm, "good", "bad"},
		{"ratio alike", "3x", quiet, quiet, "good", "good"},
		{"ratio better", "3x", storm, quiet, "good", "good"},
		{"ratio worse, not surely bad", "3x", quiet, border, "good", "skip"},
	} {
		j := job(c.threshold)
		cal, err := lab.JudgeBeside(j, ev(c.base...), ev(c.release...), "v6.12.57", "v6.12.58")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		baseV, _, relV, why := pairVerdicts(j, cal)
		if baseV != c.wantBase || relV != c.wantRelase {
			t.Errorf("%s: baseline %s, release %s (%s); want %s, %s", c.name, baseV, relV, why, c.wantBase, c.wantRelase)
		}
	}
}
