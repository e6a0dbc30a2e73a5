package nightly

import (
	"fmt"
	"strings"
	"testing"

	"kbisect/history"
	"kbisect/verdict"
)

// TestPlanNight: a night first finishes what a stopped night left (a
// bisection that did not end, a bad release with no incident), then
// judges the releases new since the last night (the first night only
// the newest), or again the one its baseline left without a verdict.
func TestPlanNight(t *testing.T) {
	followed := releases("v6.12.60", "v6.12.59", "v6.12.58", "v6.12.57")
	base := &baseline{tag: "v6.12.57"}
	bisecting := &history.Incident{ID: 1, LastGood: "v6.12.57", FirstBadTag: "v6.12.58", StateDir: "incident-v6.12.57..v6.12.58"}
	bisected := &history.Incident{ID: 1, LastGood: "v6.12.57", FirstBadTag: "v6.12.58", StateDir: "incident-v6.12.57..v6.12.58", Result: "found"}
	drifted := []history.Measurement{measured("v6.12.57", "good", 2), measured("v6.12.57", "drift", 1), measured("v6.12.60", "drift", 1)}
	drifted[2].Baseline = "v6.12.57"
	for _, c := range []struct {
		name string
		past []history.Measurement
		open *history.Incident
		base *baseline
		want string
	}{
		{"first night", nil, nil, nil, "measure v6.12.60"},
		{"new releases", []history.Measurement{measured("v6.12.58", "good", 1)}, nil, base, "measure v6.12.60 v6.12.59"},
		{"nothing new", []history.Measurement{measured("v6.12.60", "good", 1)}, nil, base, "nothing new"},
		{"a bisection that did not end", []history.Measurement{measured("v6.12.57", "good", 2), measured("v6.12.58", "bad", 1)},
			bisecting, base, "resume incident 1"},
		{"a bad release with no incident", []history.Measurement{measured("v6.12.57", "good", 2), measured("v6.12.58", "bad", 1)},
			nil, base, "open v6.12.57..v6.12.58"},
		{"a bad release with its incident", []history.Measurement{measured("v6.12.57", "good", 2), measured("v6.12.58", "bad", 1)},
			bisected, base, "measure v6.12.60 v6.12.59"},
		{"a drifted release", drifted, nil, base, "retry v6.12.60"},
		{"a drifted release, no baseline", drifted, nil, nil, "nothing new"},
	} {
		p := planNight(followed, c.past, c.open, c.base)
		var got string
		switch {
		case p.resume != nil:
			got = fmt.Sprintf("resume incident %d", p.resume.ID)
		case p.bad != "":
			got = "open " + p.good + ".." + p.bad
		case len(p.fresh) == 0:
			got = "nothing new"
		case p.retry:
			got = "retry " + tags(p.fresh)
		default:
			got = "measure " + tags(p.fresh)
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestJudgingDecidesTheNightsNextStep runs the judging of a night's
// releases on verdicts given per tag, and checks each step: the
// releases measured (! when a bad one is to be confirmed by the
// baseline measured again), and how the night ends.
func TestJudgingDecidesTheNightsNextStep(t *testing.T) {
	base := &baseline{tag: "v6.12.57"}
	for _, c := range []struct {
		name     string
		fresh    []string
		open     bool
		base     *baseline
		verdicts string // tag=verdict ...
		want     string
	}{
		{"good", []string{"v6.12.60", "v6.12.59"}, false, base, "v6.12.60=good",
			"measure v6.12.60!, good v6.12.60"},
		{"good with an incident open", []string{"v6.12.60"}, true, base, "v6.12.60=good",
			"measure v6.12.60, good v6.12.60"},
		{"bad with an incident open", []string{"v6.12.60", "v6.12.59"}, true, base, "v6.12.60=bad",
			"measure v6.12.60, still-present v6.12.60"},
		{"a regression, nights missed", []string{"v6.12.60", "v6.12.59", "v6.12.58"}, false, base, "v6.12.60=bad v6.12.59=bad v6.12.58=good",
			"measure v6.12.60!, measure v6.12.59, measure v6.12.58, bisect v6.12.58..v6.12.59"},
		{"a regression in the oldest new release", []string{"v6.12.60", "v6.12.59"}, false, base, "v6.12.60=bad v6.12.59=bad",
			"measure v6.12.60!, measure v6.12.59, bisect v6.12.57..v6.12.59"},
		{"a release that does not build on the walk back", []string{"v6.12.60", "v6.12.59", "v6.12.58"}, false, base,
			"v6.12.60=bad v6.12.59=skip v6.12.58=good",
			"measure v6.12.60!, measure v6.12.59, measure v6.12.58, bisect v6.12.58..v6.12.60"},
		{"a regression and no good release", []string{"v6.12.60"}, false, nil, "v6.12.60=bad",
			"measure v6.12.60!, nothing-to-bisect v6.12.60"},
		{"the newest could not be judged", []string{"v6.12.60", "v6.12.59"}, false, base, "v6.12.60=skip v6.12.59=good",
			"measure v6.12.60!, measure v6.12.59!, good v6.12.59"},
		{"none could be judged", []string{"v6.12.60", "v6.12.59"}, false, base, "v6.12.60=skip v6.12.59=skip",
			"measure v6.12.60!, measure v6.12.59!, unknown"},
		{"drift", []string{"v6.12.60", "v6.12.59"}, false, base, "v6.12.60=drift",
			"measure v6.12.60!, drift v6.12.60"},
		{"drift on the walk back", []string{"v6.12.60", "v6.12.59"}, false, base, "v6.12.60=bad v6.12.59=drift",
			"measure v6.12.60!, measure v6.12.59, drift v6.12.59"},
	} {
		verdicts := map[string]verdict.Verdict{}
		for _, kv := range strings.Fields(c.verdicts) {
			tag, v, _ := strings.Cut(kv, "=")
			verdicts[tag] = verdict.Verdict(v)
		}
		j := newJudging(releases(c.fresh...), c.open, c.base)
		var trace []string
		st := j.next()
		for st.kind == stepMeasure && len(trace) < 10 {
			mark := ""
			if j.confirm() {
				mark = "!"
			}
			trace = append(trace, "measure "+st.release.Tag+mark)
			st = j.judged(history.Measurement{Tag: st.release.Tag, Verdict: verdicts[st.release.Tag]})
		}
		switch st.kind {
		case stepDrift:
			trace = append(trace, "drift "+st.m.Tag)
		case stepGood:
			trace = append(trace, "good "+st.m.Tag)
		case stepUnknown:
			trace = append(trace, "unknown")
		case stepStillPresent:
			trace = append(trace, "still-present "+st.m.Tag)
		case stepNothingToBisect:
			trace = append(trace, "nothing-to-bisect "+st.m.Tag)
		case stepBisect:
			trace = append(trace, "bisect "+st.good+".."+st.bad)
		}
		if got := strings.Join(trace, ", "); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}
