package run

import (
	"fmt"
	"math"

	"kbisect/bisect"
	"kbisect/culprit"
	"kbisect/internal/commitid"
	"kbisect/lab"
	"kbisect/noise"
	"kbisect/verdict"
)

// result is how the search ended, as a bisection's result: the tested
// commits each once, with the verdict the evidence now gives them (good
// or bad at the confidence, else unsure).
func (p *posteriorRun) result(step culprit.Step) bisect.Result {
	res := bisect.Result{Reason: step.Reason}
	if step.Kind != culprit.NotReproduced {
		for _, w := range p.search.Shape() {
			res.Reason += "; " + w
		}
	}
	switch step.Kind {
	case culprit.Found:
		res.Kind, res.FirstBad = bisect.Found, p.rng.Commits[step.Commit]
		res.Candidates = append(res.Candidates, res.FirstBad)
		res.Final = &bisect.Step{Kind: bisect.StepFound, Commit: res.FirstBad}
		if ps, err := p.r.g.Parents(res.FirstBad); err == nil && len(ps) > 1 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("the first bad commit is a merge of %d parents: the change is in what it merges; bisect its side again with --good %s --bad %s",
				len(ps), commitid.Short(ps[0].String()), commitid.Short(res.FirstBad.String())))
		}
	case culprit.NotReproduced:
		res.Kind = bisect.NotReproduced
	default:
		res.Kind = bisect.Inconclusive
		for _, c := range step.Candidates {
			res.Candidates = append(res.Candidates, p.rng.Commits[c.Commit])
		}
	}
	bad := len(p.rng.Commits) - 1
	for _, c := range p.measured() {
		if c.reverted || (c.i == bad && p.search.BootsOf(bad) == len(p.bads)) {
			continue // the revert is in the summary; the bad endpoint, measured at calibration only, is a row of its own
		}
		res.Tested = append(res.Tested, bisect.Tested{Commit: p.rng.Commits[c.i], Verdict: c.verdict, Seconds: c.seconds, Source: "posterior"})
	}
	return res
}

type measuredCommit struct {
	i        int
	reverted bool
	medians  []float64
	evidence float64
	seconds  float64
	verdict  verdict.Verdict
	pBad     float64
}

// measured is every commit the search booted, in the order first booted.
func (p *posteriorRun) measured() []measuredCommit {
	pc, _ := p.search.Probabilities()
	q := p.search.Badness()
	conf := p.r.job.SearchConfidence()
	var out []measuredCommit
	at := map[[2]int]int{}
	for _, o := range p.search.Log() {
		if o.Skipped || o.Commit == culprit.GoodEndpoint {
			continue
		}
		key := [2]int{o.Commit, 0}
		if o.Reverted {
			key[1] = 1
		}
		k, ok := at[key]
		if !ok {
			k = len(out)
			at[key] = k
			out = append(out, measuredCommit{i: o.Commit, reverted: o.Reverted})
		}
		m := &out[k]
		m.medians = append(m.medians, p.fromBadness(noise.Median(o.Samples)))
		m.evidence += o.Evidence
	}
	for k := range out {
		m := &out[k]
		m.pBad = q[m.i]
		if m.reverted {
			m.pBad = 1 - pc[m.i] // the bad endpoint without it is bad unless it is the culprit
		}
		switch {
		case m.pBad >= conf:
			m.verdict = verdict.Bad
		case m.pBad <= 1-conf:
			m.verdict = verdict.Good
		default:
			m.verdict = verdict.Unsure
		}
	}
	var kept []measuredCommit
	for _, m := range out {
		if !m.reverted {
			kept = append(kept, m)
		}
	}
	return append(kept, reverted(out)...)
}

func reverted(ms []measuredCommit) []measuredCommit {
	var out []measuredCommit
	for _, m := range ms {
		if m.reverted {
			out = append(out, m)
		}
	}
	return out
}

// summary is where the search stands, for search.json and the reports.
func (p *posteriorRun) summary(end *culprit.Step) *lab.SearchSummary {
	_, none := p.search.Probabilities()
	m := p.search.Model()
	s := &lab.SearchSummary{Confidence: p.r.job.SearchConfidence(), None: none, Boots: p.search.Boots(),
		CalibrationBoots: len(p.goods) + len(p.bads), RangeCommits: len(p.rng.Commits),
		Model: map[string]float64{"good": noise.Tidy(p.rule.MetricKind, p.fromBadness(math.Exp(m.Good))), "bad": noise.Tidy(p.rule.MetricKind, p.fromBadness(math.Exp(m.Bad))),
			"boot_spread": noise.Significant(m.BootSpread, 4), "spread": noise.Significant(m.Spread, 4),
			"bad_boots": noise.Significant(m.BadBoots, 4), "shows": noise.Significant(m.Shows, 4),
			"spikes_good": noise.Significant(m.SpikesGood, 4), "spikes_bad": noise.Significant(m.SpikesBad, 4),
			"crossings": noise.Significant(m.Crossings, 4), "drift": noise.Significant(m.Drift, 4)}}
	for _, c := range p.search.Leading(10) {
		s.Candidates = append(s.Candidates, lab.SearchCandidate{Commit: p.rng.Commits[c.Commit].String(), Probability: c.Probability})
	}
	if len(s.Candidates) > 0 {
		s.Probability = s.Candidates[0].Probability
	}
	for _, c := range p.measured() {
		sc := lab.SearchCommit{Commit: p.rng.Commits[c.i].String(), Reverted: c.reverted, Medians: c.medians, Evidence: c.evidence, PBad: c.pBad}
		if c.i == len(p.rng.Commits)-1 && !c.reverted {
			sc.Calibration = len(p.bads)
		}
		s.Commits = append(s.Commits, sc)
	}
	s.Shape = p.search.Shape()
	if p.pool != nil {
		s.Machines = p.pool.summary()
	}
	if end == nil && p.forecast.Boots > 0 {
		f := p.forecast
		s.Forecast = &f
	}
	if end != nil {
		s.Reason = end.Reason
		switch end.Kind {
		case culprit.Found:
			s.Result = string(bisect.Found)
			s.Probability = end.Probability
			for _, l := range end.Later {
				s.Later = append(s.Later, p.rng.Commits[l].String())
			}
		case culprit.NotReproduced:
			s.Result = string(bisect.NotReproduced)
		default:
			s.Result = string(bisect.Inconclusive)
		}
	}
	return s
}

// logDecided writes the commits the evidence decided, good or bad at the
// confidence, into the session log as verdicts: git-bisect.log then holds
// them as git bisect would replay them. Commits the evidence left unsure
// are not there; search.json has every boot.
func (r *jobRun) logDecided(res bisect.Result) error {
	have := map[string]bool{}
	for _, rec := range r.log.Records() {
		if rec.Event == bisect.EventVerdict {
			have[rec.Commit] = true
		}
	}
	for _, t := range res.Tested {
		c := t.Commit.String()
		if have[c] || (t.Verdict != verdict.Good && t.Verdict != verdict.Bad) {
			continue
		}
		if err := r.log.Append(bisect.Record{Event: bisect.EventVerdict, Commit: c, Verdict: t.Verdict, Seconds: t.Seconds, Source: "posterior"}); err != nil {
			return err
		}
	}
	return nil
}

// gather writes each tested commit's boots as one evidence, with the
// verdict the evidence gave it, where the reports read a commit's
// numbers (its per-CPU tables among them).
func (p *posteriorRun) gather(res bisect.Result) error {
	subs := map[string][]string{}
	for _, rec := range p.journal.Records() {
		if rec.Kind == lab.SearchBoot && !rec.Reverted && rec.Sub != "" {
			subs[rec.Commit] = append(subs[rec.Commit], rec.Sub)
		}
	}
	for _, t := range res.Tested {
		c := t.Commit.String()
		if err := lab.GatherBoots(p.r.stateDir, c, subs[c], t.Verdict, "the boots of the search"); err != nil {
			return err
		}
	}
	return nil
}
