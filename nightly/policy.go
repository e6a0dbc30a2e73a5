package nightly

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/history"
	"kbisect/lab"
	"kbisect/verdict"
)

// judged says whether a verdict is one a night acts on: good or bad. A
// release that could not be judged is skip; a release, and its baseline,
// are drift when the baseline measured again beside it is bad too: the
// machine changed.
func judged(v verdict.Verdict) bool {
	return v == verdict.Good || v == verdict.Bad
}

// baseline is what a new release is judged against: the newest release
// measured good on the machine, with its samples.
type baseline struct {
	tag, commit string
	values      []float64
	at          time.Time
	// stale says it is measured again before a release is judged against
	// it (why says why): its measurement is older than
	// nightly.baseline_max_age, or its newest one is not good (the
	// machine drifted).
	stale bool
	why   string
	// tonight says this night measured it.
	tonight bool
}

// baselineOf finds the baseline in the history: the newest release
// measured good (nil when none is). Its age is read from two clocks, so
// that a clock jump cannot make an old baseline fresh: its date against
// now (a date after now is a clock that jumped: stale), and the nights
// that measured something since it (at least one day apart, or the
// nightly runs more often and measures its baseline again sooner).
func baselineOf(past []history.Measurement, metric string, maxAge time.Duration, now time.Time) *baseline {
	var b *baseline
	at := -1 // its row in past
	for i := len(past) - 1; i >= 0; i-- {
		if m := past[i]; m.Verdict == verdict.Good {
			b, at = &baseline{tag: m.Tag, commit: m.Commit, values: m.Values, at: m.MeasuredAt}, i
			if m.Metric != metric {
				b.stale, b.why = true, fmt.Sprintf("it was measured on %s, and the job now judges %s", m.Metric, metric)
			}
			break
		}
	}
	if b == nil || b.stale {
		return b
	}
	for i := len(past) - 1; i >= 0; i-- {
		if m := past[i]; m.Tag == b.tag {
			if m.Verdict != verdict.Good {
				b.stale, b.why = true, fmt.Sprintf("its last measurement (%s) was %s", m.MeasuredAt.Local().Format("2006-01-02 15:04"), m.Verdict)
			}
			break
		}
	}
	if b.stale {
		return b
	}
	age, nights := now.Sub(b.at), nightsSince(past, at)
	switch maxNights := int((maxAge + 24*time.Hour - 1) / (24 * time.Hour)); {
	case age < 0:
		b.stale, b.why = true, fmt.Sprintf("its measurement is dated %s, after this night began (%s): the clock jumped, so its age is unknown",
			b.at.Local().Format("2006-01-02 15:04"), now.Local().Format("2006-01-02 15:04"))
	case age > maxAge:
		b.stale, b.why = true, fmt.Sprintf("measured %s ago, longer than nightly.baseline_max_age (%s)", ageText(age), configs.Duration(maxAge))
	case nights >= maxNights:
		b.stale, b.why = true, fmt.Sprintf("%d nights have measured since it, as many as nightly.baseline_max_age (%s) has days, "+
			"though its date says %s ago: the clock jumped", nights, configs.Duration(maxAge), ageText(age))
	}
	return b
}

// nightsSince counts the nights that measured something after the
// measurement past[i], its own night aside.
func nightsSince(past []history.Measurement, i int) int {
	seen := map[string]bool{past[i].Night: true}
	n := 0
	for _, m := range past[i+1:] {
		if m.Night != "" && !seen[m.Night] {
			seen[m.Night] = true
			n++
		}
	}
	return n
}

// ageText says how long ago, in days from two of them.
func ageText(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%.0f days", d.Hours()/24)
	}
	return d.Round(time.Second).String()
}

// newReleases are those newer than every tag measured before, newest
// first (a tag older than the newest measured is history, not news).
func newReleases(tags []bisect.Release, past []history.Measurement) []bisect.Release {
	measured := map[string]bool{}
	for _, m := range past {
		measured[m.Tag] = true
	}
	var out []bisect.Release
	for _, r := range tags {
		if measured[r.Tag] {
			break // tags are newest first: the rest is older
		}
		out = append(out, r)
	}
	return out
}

// pendingRegression finds, in the measurements, a bad release newer than
// the newest good one: the oldest such bad one and that good one ("" when
// the newest measured release is good, or none is good).
func pendingRegression(past []history.Measurement) (good, bad string) {
	type rel struct {
		r bisect.Release
		m history.Measurement
	}
	var rs []rel
	for _, m := range past {
		if r, ok := bisect.ParseRelease(m.Tag); ok && judged(m.Verdict) {
			rs = append(rs, rel{r, m})
		}
	}
	slices.SortStableFunc(rs, func(a, b rel) int { return bisect.CompareReleases(b.r, a.r) }) // newest first
	for _, x := range rs {
		if x.m.Verdict == verdict.Good {
			return x.m.Tag, bad
		}
		bad = x.m.Tag
	}
	return "", bad
}

// unjudgedRelease is the newest release measured when its baseline left
// it without a verdict: a drift, or unsure beside it ("" otherwise).
// The nights judge it again until it has one, or a newer release comes.
func unjudgedRelease(past []history.Measurement) string {
	var newest *history.Measurement
	var at bisect.Release
	for i := range past {
		r, ok := bisect.ParseRelease(past[i].Tag)
		if !ok {
			continue
		}
		if newest == nil || bisect.CompareReleases(r, at) >= 0 {
			newest, at = &past[i], r
		}
	}
	if newest != nil && (newest.Verdict == verdict.Drift || (newest.Verdict == verdict.Skip && newest.Baseline != "")) {
		return newest.Tag
	}
	return ""
}

// openIncidents are the incidents no release has closed yet, oldest
// first.
func openIncidents(incidents []history.Incident) []*history.Incident {
	var out []*history.Incident
	for i := range incidents {
		if incidents[i].Open() {
			out = append(out, &incidents[i])
		}
	}
	return out
}

// pairVerdicts are the verdicts of a baseline and a release judged
// beside it, with their reasons.
//   - Under a ratio or auto threshold the baseline is good by
//     definition: it is the reference. The release is bad when the rule
//     says so, good when it is no worse than the baseline or the rule
//     calls it good, and unsure (skip) otherwise.
//   - Under an absolute one each is decided. A bad release beside a bad
//     baseline is the machine's drift; beside a baseline that is not
//     surely good it is not judged (skip): nothing is bisected from a
//     baseline in doubt.
func pairVerdicts(job *configs.Job, c *lab.Calibration) (baseV verdict.Verdict, baseWhy string, relV verdict.Verdict, relWhy string) {
	baseV, baseWhy, relV, relWhy = c.Good.Verdict, c.Good.Reason, c.Bad.Verdict, c.Bad.Reason
	if lab.Relative(job) {
		baseV = verdict.Good
		switch {
		case c.Reproduced:
			relV = verdict.Bad
		case c.Bad.Decision != nil && c.Bad.Decision.Verdict == verdict.Good, !c.Rule.Worse(c.Bad.Values, c.Good.Values):
			relV = verdict.Good
		default:
			relV, relWhy = verdict.Skip, "unsure: "+strings.TrimPrefix(relWhy, "unsure: ")
		}
		return
	}
	switch {
	case relV == verdict.Bad && baseV == verdict.Bad:
		return verdict.Drift, baseWhy, verdict.Drift, relWhy
	case relV == verdict.Bad && baseV != verdict.Good:
		relV, relWhy = verdict.Skip, fmt.Sprintf("%s; but the baseline measured again is not surely good (%s)", relWhy, baseWhy)
	}
	return
}
