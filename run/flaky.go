package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/culprit"
	"kbisect/internal/usage"
	"kbisect/progress"
	"kbisect/report"
	"kbisect/testcmd"
	"kbisect/verdict"
)

// flakyMeta is the start record's word for a bisection of a flaky test.
func flakyMeta(confidence float64) string {
	if confidence == 0 {
		return ""
	}
	return "true"
}

// bisectFlaky bisects with a test that fails only sometimes on a bad
// commit (culprit.Flaky): each run of the test is one observation,
// appended to the session log (synced) before the next run is chosen,
// so the same command resumes by replaying the runs. The session log
// keeps each run as a verdict of the commit: good for a pass, bad for a
// failure, skip.
func (r *execRun) bisectFlaky(ctx context.Context, tester *testcmd.Tester) (bisect.Result, error) {
	res := bisect.Result{Kind: bisect.Aborted}
	start := r.start
	bad, ok := bisect.ParseHash(start.Bad)
	if !ok {
		return res, fmt.Errorf("session log: bad commit %q is not a commit name", start.Bad)
	}
	var goods []plumbing.Hash
	for _, name := range start.Good {
		h, ok := bisect.ParseHash(name)
		if !ok {
			return res, fmt.Errorf("session log: good commit %q is not a commit name", name)
		}
		// git tests the merge base of a good revision off the bad one's
		// history first; this bisection would take it as good unseen.
		if anc, err := r.g.IsAncestor(h, bad); err != nil {
			return res, err
		} else if !anc {
			return res, usage.Errorf("--confidence needs every --good to be an ancestor of --bad, and %s is not: give their merge base (git merge-base) as --good", h)
		}
		goods = append(goods, h)
	}
	tester.Good = func() plumbing.Hash { return goods[0] }
	commits, parents, err := r.g.RangeCommits(bad, goods, start.FirstParent)
	if err != nil {
		return res, err
	}
	if len(commits) == 0 {
		res.Kind, res.Reason = bisect.NotReproduced, fmt.Sprintf("%s is reachable from a good revision: the range holds no commit", bad)
		return res, nil
	}
	d, err := culprit.NewDAG(parents)
	if err != nil {
		return res, err
	}
	// The confidence asked now: another one goes on from the same runs.
	s, err := culprit.NewFlaky(d, culprit.FlakyOptions{Confidence: r.o.Confidence, MaxRuns: r.o.MaxRuns})
	if err != nil {
		return res, usage.Errorf("run: %v", err)
	}
	index := make(map[plumbing.Hash]int, len(commits))
	for i, h := range commits {
		index[h] = i
	}
	observe := func(i int, v verdict.Verdict) {
		if v == verdict.Skip {
			s.Skip(i)
		} else {
			s.Observe(i, v == verdict.Bad)
		}
	}
	for n, rec := range r.log.Records() {
		if rec.Event != bisect.EventVerdict {
			continue
		}
		h, _ := bisect.ParseHash(rec.Commit)
		i, ok := index[h]
		v, err := verdict.Parse(string(rec.Verdict))
		if !ok || err != nil || (v != verdict.Good && v != verdict.Bad && v != verdict.Skip) {
			return res, fmt.Errorf("session log record %d: a run of %s (%s) that is not in the range", n+1, rec.Commit, rec.Verdict)
		}
		// Replayed as the search took it: a confirmation under way
		// counts its fresh runs from where it began.
		if err := s.Replay(culprit.FlakyRun{Commit: i, Failed: v == verdict.Bad, Skipped: v == verdict.Skip}); err != nil {
			return res, fmt.Errorf("session log record %d: %w", n+1, err)
		}
		res.Tested = append(res.Tested, bisect.Tested{Commit: h, Verdict: v, Seconds: rec.Seconds, Source: rec.Source})
	}
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		step := s.Next()
		if step.Kind != culprit.Measure {
			return flakyAnswer(res, step, commits, s.Rate()), nil
		}
		h := commits[step.Commit]
		runs, _ := s.RunsOf(step.Commit)
		c := h.String()
		r.ev.sink.Emit(progress.Event{Kind: progress.Testing, Commit: c, Subject: r.ev.subject(c),
			Step: progress.Step{Run: runs + 1, Probability: step.Probability}})
		began := time.Now()
		out, err := tester.Test(ctx, h)
		elapsed := time.Since(began)
		if err == nil && ctx.Err() != nil {
			err = ctx.Err() // interrupted while the test ran: its outcome is not trusted
		}
		if err != nil {
			if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				err = fmt.Errorf("%w (%v)", ctx.Err(), err)
			}
			return res, err
		}
		rec := bisect.Record{Event: bisect.EventVerdict, Commit: c, Verdict: out.Verdict, Seconds: elapsed.Seconds(),
			ExitCode: out.ExitCode, Source: "test", Note: out.Note}
		if err := r.log.Append(rec); err != nil {
			return res, err
		}
		observe(step.Commit, out.Verdict)
		res.Tested = append(res.Tested, bisect.Tested{Commit: h, Verdict: out.Verdict, Seconds: elapsed.Seconds(), Source: "test"})
		r.ev.sink.Emit(progress.Event{Kind: progress.Tested, Commit: c, Verdict: out.Verdict, Text: out.Note, Elapsed: elapsed,
			Step: progress.Step{Run: runs + 1}})
	}
}

// flakyAnswer is how the search ended, in commits.
func flakyAnswer(res bisect.Result, step culprit.Step, commits []plumbing.Hash, rate float64) bisect.Result {
	res.Candidates, res.Probabilities, res.FailureRate = []plumbing.Hash{}, []float64{}, rate
	for _, c := range step.Candidates {
		res.Candidates = append(res.Candidates, commits[c.Commit])
		res.Probabilities = append(res.Probabilities, c.Probability)
	}
	res.Reason = step.Reason
	switch step.Kind {
	case culprit.Found:
		res.Kind, res.FirstBad = bisect.Found, commits[step.Commit]
		res.Candidates, res.Probabilities = res.Candidates[:1], res.Probabilities[:1]
	default:
		res.Kind = bisect.Inconclusive
	}
	return res
}

// saveFlakyResult writes result.json into the state directory. A
// bisection of a flaky test has no git-bisect.log: git would read its
// runs as contradicting verdicts.
func saveFlakyResult(_ context.Context, _ *bisect.Graph, log *bisect.StateLog, _ bisect.Result, out report.RunJSON) error {
	return writeResultJSON(log.Dir(), out)
}
