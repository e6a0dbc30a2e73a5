package nightly

import (
	"kbisect/bisect"
	"kbisect/history"
	"kbisect/verdict"
)

// plan is what a night sets out to do, decided from the releases
// followed and the history before anything is measured. What a night
// stopped midway left is finished before anything new.
type plan struct {
	// resume is an incident whose bisection did not end: it is resumed.
	resume *history.Incident
	// good and bad are a regression measured by a night that stopped
	// before it opened an incident: it is opened now.
	good, bad string
	// fresh are the releases to judge, newest first; none when there is
	// nothing new.
	fresh []bisect.Release
	// retry says fresh is a release its baseline left without a verdict
	// (a drift, or unsure beside it), judged again.
	retry bool
}

// planNight decides a night's plan from the release tags followed
// (newest first), the measurements before it, the newest open incident
// and the baseline.
func planNight(tags []bisect.Release, past []history.Measurement, open *history.Incident, base *baseline) plan {
	if open != nil && open.Result == "" && open.StateDir != "" {
		return plan{resume: open}
	}
	if open == nil {
		if good, bad := pendingRegression(past); bad != "" && good != "" {
			return plan{good: good, bad: bad}
		}
	}
	p := plan{fresh: newReleases(tags, past)}
	if len(past) == 0 && len(p.fresh) > 1 {
		p.fresh = p.fresh[:1] // the first night: the newest is the baseline
	}
	if tag := unjudgedRelease(past); len(p.fresh) == 0 && tag != "" && base != nil {
		for _, r := range tags {
			if r.Tag == tag {
				p.fresh, p.retry = []bisect.Release{r}, true
			}
		}
	}
	return p
}

// stepKind is what a night does after a release is judged.
type stepKind int

const (
	// stepMeasure measures the step's release.
	stepMeasure stepKind = iota
	// stepDrift ends the night: the baseline measured bad beside the
	// release, the machine changed.
	stepDrift
	// stepGood ends the night: the newest release is good, and the open
	// incidents are fixed.
	stepGood
	// stepUnknown ends the night: no new release could be judged.
	stepUnknown
	// stepStillPresent ends the night: the newest release is bad, and
	// the open incident is its regression.
	stepStillPresent
	// stepNothingToBisect ends the night: the newest release is bad,
	// and no release measured good on the machine to bisect from.
	stepNothingToBisect
	// stepBisect opens an incident between the step's good and bad
	// releases and bisects it.
	stepBisect
)

// step is what a night does next.
type step struct {
	kind stepKind
	// release is the release to measure (stepMeasure).
	release bisect.Release
	// m is the measurement the night ends on: the drifted release, or
	// the newest release judged good or bad.
	m history.Measurement
	// good and bad are the range to bisect (stepBisect).
	good, bad string
}

// judging decides, measurement by measurement, what a night's new
// releases mean. The newest is measured first; one that cannot be judged
// gives way to the next older. A bad newest release with no incident
// open is a new regression: the older new releases are measured, newest
// first, down to a good one (the nights missed), and the range from the
// last good release to the first bad one is bisected.
type judging struct {
	fresh []bisect.Release // not measured yet, newest first
	open  bool             // an incident is open: a bad release is still it
	// walking says the newest release is bad and the older ones are
	// measured.
	walking  bool
	newest   history.Measurement
	firstBad string
	lastGood string
}

// newJudging starts judging the new releases (newest first, at least
// one); with an incident open or not, against the baseline (nil for
// none).
func newJudging(fresh []bisect.Release, open bool, base *baseline) *judging {
	j := &judging{fresh: fresh, open: open}
	if base != nil {
		j.lastGood = base.tag
	}
	return j
}

// confirm says whether a bad release is confirmed by its baseline
// measured again: only the newest, and only when it would open an
// incident.
func (j *judging) confirm() bool {
	return !j.open && !j.walking
}

// judged takes a release's measurement, as judged, and says what
// follows.
func (j *judging) judged(m history.Measurement) step {
	if m.Verdict == verdict.Drift {
		return step{kind: stepDrift, m: m}
	}
	if j.walking {
		switch m.Verdict {
		case verdict.Good:
			j.lastGood = m.Tag
			return j.bisect()
		case verdict.Bad:
			j.firstBad = m.Tag
		}
		if len(j.fresh) == 0 {
			return j.bisect()
		}
		return j.next()
	}
	switch m.Verdict {
	case verdict.Good:
		return step{kind: stepGood, m: m}
	case verdict.Bad:
		j.newest = m
		if j.open {
			return step{kind: stepStillPresent, m: m}
		}
		j.walking, j.firstBad = true, m.Tag
		if len(j.fresh) == 0 {
			return j.bisect()
		}
		return j.next()
	}
	if len(j.fresh) == 0 {
		return step{kind: stepUnknown}
	}
	return j.next()
}

// next measures the next release, newest first.
func (j *judging) next() step {
	r := j.fresh[0]
	j.fresh = j.fresh[1:]
	return step{kind: stepMeasure, release: r}
}

// bisect ends the walk back: the range to bisect, or none without a
// good release.
func (j *judging) bisect() step {
	if j.lastGood == "" {
		return step{kind: stepNothingToBisect, m: j.newest}
	}
	return step{kind: stepBisect, m: j.newest, good: j.lastGood, bad: j.firstBad}
}
