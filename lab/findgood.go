package lab

import (
	"context"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/internal/atomicfile"
	"kbisect/internal/commitid"
	"kbisect/noise"
	"kbisect/verdict"
)

// Search is the walk back from a good endpoint that measured bad, to an
// older release that measures good: what was tried, what it cost, and
// the range the bisection goes on with.
type Search struct {
	// Given is the good endpoint the user gave, which measured bad; From
	// the release the walk started below.
	Given string `json:"given"`
	From  string `json:"from"`
	Tried []Try  `json:"tried"`
	// Kernels is how many kernels the walk measured (or tried to build).
	Kernels int `json:"kernels"`
	// Found is the release that measured good, "" when none did; Good its
	// commit. Bad is the oldest revision measured bad on the way down:
	// the bisection's new bad end (the first bad commit is below it).
	Found string `json:"found,omitempty"`
	Good  string `json:"good,omitempty"`
	Bad   string `json:"bad"`
	// Reason says how the walk ended.
	Reason string `json:"reason"`
}

// Try is one release of the walk.
type Try struct {
	Tag     string          `json:"tag"`
	Commit  string          `json:"commit"`
	Verdict verdict.Verdict `json:"verdict"`
	Reason  string          `json:"reason"`
	// Median of the samples, in the metric's unit (none when not
	// measured).
	Median  float64 `json:"median,omitempty"`
	Kind    string  `json:"kind,omitempty"`
	Seconds float64 `json:"seconds"`
}

// Walk is what FindGood walks: the releases to try, in order, and how to
// tell that one is below another (the bisection's graph).
type Walk struct {
	Plan       *bisect.WalkBack
	IsAncestor func(a, b plumbing.Hash) (bool, error)
	// MaxKernels bounds the kernels the walk measures.
	MaxKernels int
	// Tried hears each release's verdict as the walk goes (nil: nothing).
	Tried func(Try)
	// Testing hears the release about to be measured and the one that
	// comes after it if it is bad, to build ahead (nil: nothing).
	Testing func(now, next string)
}

// FindGood walks back from the calibration's good endpoint, which
// measured bad, along the releases of the plan: each one below the last
// bad one is built and measured, and judged as the good endpoint would be
// (with a ratio or auto threshold: the bad endpoint must be bad against
// it). The first good one ends the walk: the calibration then holds it as
// the good endpoint, with the walk in Search, and is kept in the state
// directory. A walk that finds none keeps the calibration not reproduced,
// with the walk saying what was measured. A calibration that already
// holds a walk is returned as it is.
func (p *Pipeline) FindGood(ctx context.Context, cal *Calibration, walk Walk) (*Calibration, error) {
	return findGood(ctx, []*Pipeline{p}, cal, walk)
}

func findGood(ctx context.Context, pipes []*Pipeline, cal *Calibration, walk Walk) (*Calibration, error) {
	p := pipes[0]
	if cal.Search != nil || !cal.GoodIsBad {
		return cal, nil
	}
	base, err := Rule(p.Job, nil, nil)
	if err != nil {
		return nil, err
	}
	c := *cal
	s := &Search{Given: cal.Good.Commit, From: walk.Plan.From.Tag, Bad: cal.Good.Commit}
	bads := []*Evidence{cal.Good} // measured bad on the way down, newest first
	for i, r := range walk.Plan.Candidates {
		if s.Kernels >= walk.MaxKernels {
			s.Reason = fmt.Sprintf("no release measured good in %d kernels (find_good.max_kernels)", walk.MaxKernels)
			break
		}
		bad := plumbing.NewHash(s.Bad)
		below, err := walk.IsAncestor(r.Commit, bad)
		if err != nil {
			return nil, err
		}
		if !below {
			s.Tried = append(s.Tried, Try{Tag: r.Tag, Commit: r.Commit.String(), Verdict: verdict.Skip,
				Reason: "not an ancestor of " + commitid.Short(s.Bad) + ": not on the way back"})
			continue
		}
		if walk.Testing != nil {
			next := ""
			if i+1 < len(walk.Plan.Candidates) {
				next = walk.Plan.Candidates[i+1].Commit.String()
			}
			walk.Testing(r.Commit.String(), next)
		}
		ev, err := p.candidate(ctx, r.Commit.String(), base)
		if err != nil {
			return nil, fmt.Errorf("walking back to a good release: %s: %w", r.Tag, err)
		}
		s.Kernels++
		try := Try{Tag: r.Tag, Commit: ev.Commit, Verdict: ev.Verdict, Reason: ev.Reason, Kind: ev.Kind, Seconds: ev.Seconds}
		if len(ev.Values) > 0 {
			try.Median = noise.Median(ev.Values)
		}
		if base.Kind != noise.Absolute && len(ev.Values) > 0 {
			// Good only if the bad endpoint is bad against it.
			t := c
			b := *cal.Bad
			t.Good, t.Bad = ev, &b
			if err := t.judge(base, ev.Commit, cal.Bad.Commit); err != nil {
				return nil, err
			}
			switch {
			case t.Reproduced:
				c = t
			case t.GoodIsBad:
				ev.Verdict, ev.Reason = verdict.Bad, fmt.Sprintf("no better than the bad endpoint: median %s, the bad endpoint's %s",
					noise.FormatValue(base.MetricKind, noise.Median(ev.Values)), noise.FormatValue(base.MetricKind, noise.Median(cal.Bad.Values)))
			default:
				ev.Verdict, ev.Reason = verdict.Skip, t.Reason
			}
			try.Verdict, try.Reason = ev.Verdict, ev.Reason
			if err := p.save(ev); err != nil {
				return nil, err
			}
		}
		s.Tried = append(s.Tried, try)
		if walk.Tried != nil {
			walk.Tried(try)
		}
		switch try.Verdict {
		case verdict.Good:
			s.Found, s.Good = r.Tag, ev.Commit
			if base.Kind == noise.Absolute {
				c.Good, c.Rule.Good = ev, ev.Values
				c.Reproduced = true
			}
			c.GoodIsBad = false
			c.Reason = fmt.Sprintf("the good endpoint %s is bad: %s; %s is good: %s (%d kernels back)",
				commitid.Short(cal.Good.Commit), cal.Good.Reason, r.Tag, ev.Reason, s.Kernels)
		case verdict.Bad:
			s.Bad = ev.Commit
			bads = append(bads, ev)
		}
		if s.Found != "" {
			break
		}
	}
	if s.Found == "" && s.Reason == "" {
		s.Reason = fmt.Sprintf("no release measured good down to %s", lastTag(walk.Plan))
	}
	if s.Found == "" {
		c.Reason = fmt.Sprintf("%s; walking back found no good release: %s", cal.Reason, s.Reason)
	} else {
		s.Reason = fmt.Sprintf("%s measured good after %d kernels", s.Found, s.Kernels)
		// The bisection's bad end: the oldest revision bad under the rule
		// the bisection judges by (a ratio or auto rule is now set by the
		// release found good; what only measured alike before may not
		// be), else the bad endpoint.
		s.Bad = cal.Bad.Commit
		for i := len(bads) - 1; i >= 0; i-- {
			d, err := c.Rule.Decide(bads[i].Values)
			if err != nil {
				return nil, err
			}
			if d.Verdict == verdict.Bad {
				s.Bad = bads[i].Commit
				break
			}
		}
		if s.Bad != bads[len(bads)-1].Commit {
			s.Reason += fmt.Sprintf("; the bisection's bad end is %s, the oldest revision bad against it", commitid.Short(s.Bad))
		}
	}
	c.Search = s
	if err := atomicfile.WriteJSON(p.calibrationPath(), &c); err != nil {
		return nil, err
	}
	for _, q := range pipes {
		q.SetRule(c.Rule)
	}
	return &c, nil
}

// candidate measures a release of the walk back: as any bisection step
// with an absolute threshold (its evidence kept and reused), with the
// calibration's fixed samples otherwise, its verdict left to the caller.
func (p *Pipeline) candidate(ctx context.Context, commit string, base noise.Rule) (*Evidence, error) {
	if base.Kind == noise.Absolute {
		return p.Evidence(ctx, commit)
	}
	if ev, err := p.load(commit); err == nil && len(ev.Values) > 0 {
		return ev, nil
	}
	rule := p.rule
	p.SetRule(base) // no endpoints: the samples are only taken
	defer p.SetRule(rule)
	ev, err := p.test(ctx, commit, max(base.MaxSamples, base.MinSamples, 3), "")
	if err != nil {
		return nil, err
	}
	return ev, p.save(ev)
}

func lastTag(w *bisect.WalkBack) string {
	if len(w.Candidates) == 0 {
		return w.From.Tag
	}
	return w.Candidates[len(w.Candidates)-1].Tag
}
