package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"kbisect/bisect"
	"kbisect/lab"
	"kbisect/noise"
	"kbisect/verdict"
)

// RunJSON is the --json answer, as in the design's contract.
type RunJSON struct {
	Result     string       `json:"result"`
	FirstBad   string       `json:"first_bad,omitempty"`
	Candidates []string     `json:"candidates"`
	Steps      int          `json:"steps"`
	Tested     []TestedJSON `json:"tested"`
	StateDir   string       `json:"state_dir"`
	Reason     string       `json:"reason,omitempty"`
	Warnings   []string     `json:"warnings,omitempty"`
	// Confirmed says, for run --job, whether the first bad commit and its
	// parent measured bad and good again on fresh boots.
	Confirmed *bool `json:"confirmed,omitempty"`
	// Confirmation is how, for run --job: the first bad commit against
	// its parent, and the bad endpoint against itself with the culprit
	// reverted, as kbisect ab compares.
	Confirmation *ConfirmationJSON `json:"confirmation,omitempty"`
	// FindGood is the walk back from a good endpoint that measured bad,
	// for run --job.
	FindGood *FindGoodJSON `json:"find_good,omitempty"`
	// Posterior is, for a posterior search, every candidate's probability
	// and what each measured commit's boots said.
	Posterior *lab.SearchSummary `json:"posterior,omitempty"`
	// Probability is, for run --exec --confidence, the first bad
	// commit's probability (found), or the most probable candidate's;
	// Probabilities are every candidate's, most probable first, and
	// FailureRate the estimated rate at which the test fails on a bad
	// commit.
	Probability   float64               `json:"probability,omitempty"`
	Probabilities []lab.SearchCandidate `json:"probabilities,omitempty"`
	FailureRate   float64               `json:"failure_rate,omitempty"`
	// Stopped is, for report on a run with no answer that nobody runs,
	// when it stopped and the command that resumes it.
	Stopped *StoppedJSON `json:"stopped,omitempty"`
	// Command reproduces (or resumes) the run.
	Command string `json:"command,omitempty"`
	Error   string `json:"error,omitempty"`
}

// FindGoodJSON is the walk back to a good release.
type FindGoodJSON struct {
	Given   string        `json:"given"`
	From    string        `json:"from"`
	Found   string        `json:"found,omitempty"`
	Good    string        `json:"good,omitempty"`
	Bad     string        `json:"bad"`
	Kernels int           `json:"kernels"`
	Reason  string        `json:"reason"`
	Tried   []FindTryJSON `json:"tried"`
}

type FindTryJSON struct {
	Tag     string          `json:"tag"`
	Commit  string          `json:"commit"`
	Verdict verdict.Verdict `json:"verdict"`
	Reason  string          `json:"reason"`
	Median  float64         `json:"median,omitempty"`
	Seconds float64         `json:"seconds"`
}

type ConfirmationJSON struct {
	Confirmed  bool           `json:"confirmed"`
	WithParent *ABCompareJSON `json:"with_parent,omitempty"`
	Reverted   *ABCompareJSON `json:"reverted,omitempty"`
	Flags      []string       `json:"flags,omitempty"`
}

// ABCompareJSON is one A/B comparison of a confirmation.
type ABCompareJSON struct {
	SideA      ABSideJSON `json:"a"`
	SideB      ABSideJSON `json:"b"`
	Rounds     int        `json:"rounds"`
	Samples    int        `json:"samples"`
	Conclusion string     `json:"conclusion"`
	Direction  string     `json:"direction,omitempty"`
	P          float64    `json:"p"`
	Shift      float64    `json:"shift"`
	ShiftLow   float64    `json:"shift_low"`
	ShiftHigh  float64    `json:"shift_high"`
}

type TestedJSON struct {
	Commit  string          `json:"commit"`
	Verdict verdict.Verdict `json:"verdict"`
	Seconds float64         `json:"seconds"`
	Source  string          `json:"source,omitempty"`
	Metric  *MetricJSON     `json:"metric,omitempty"`
}

// MetricJSON is what a kernel measured, for run --job: the samples'
// values of the job's metric, their median, the rule's threshold, and why
// the verdict is what it is.
type MetricJSON struct {
	Name      string    `json:"name,omitempty"`
	Kind      string    `json:"kind,omitempty"`
	Values    []float64 `json:"values,omitempty"`
	Median    float64   `json:"median,omitempty"`
	Threshold float64   `json:"threshold,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	SameAs    string    `json:"same_as,omitempty"`
}

func RunJSONOf(res bisect.Result, dir string, runErr error) RunJSON {
	out := RunJSON{Result: string(res.Kind), Candidates: []string{}, Tested: []TestedJSON{}, StateDir: dir, Reason: res.Reason, Warnings: res.Warnings}
	if res.Kind == bisect.Found {
		out.FirstBad = res.FirstBad.String()
	}
	for i, c := range res.Candidates {
		out.Candidates = append(out.Candidates, c.String())
		if i < len(res.Probabilities) {
			out.Probabilities = append(out.Probabilities, lab.SearchCandidate{Commit: c.String(), Probability: res.Probabilities[i]})
		}
	}
	if len(out.Probabilities) > 0 {
		out.Probability, out.FailureRate = out.Probabilities[0].Probability, res.FailureRate
	}
	for _, t := range res.Tested {
		out.Tested = append(out.Tested, TestedJSON{Commit: t.Commit.String(), Verdict: t.Verdict, Seconds: t.Seconds, Source: t.Source})
		if t.Source != "replay" {
			out.Steps++
		}
	}
	if runErr != nil {
		out.Result = string(bisect.Aborted)
		out.Error = runErr.Error()
	}
	return out
}

func WriteJSON(w io.Writer, out any) {
	b, _ := MarshalJSON(out)
	fmt.Fprintf(w, "%s\n", b)
}

// MarshalJSON writes a report as JSON for people and scripts alike:
// indented, and with <, > and & as themselves (a reason may say
// "probability >0.9999").
func MarshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func WriteGitResult(ctx context.Context, w io.Writer, g *bisect.Graph, res bisect.Result) {
	for _, msg := range res.Warnings {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
	if res.Probabilities != nil {
		writeFlakyResult(ctx, w, g, res)
		return
	}
	switch res.Kind {
	case bisect.Found:
		fmt.Fprintf(w, "%s is the first bad commit\n", res.FirstBad)
		if info, err := g.Info(ctx, res.FirstBad); err == nil {
			fmt.Fprintf(w, "commit %s\nAuthor: %s\nDate:   %s\n\n    %s\n", info.Hash, info.Author, info.Date, info.Subject)
		}
	case bisect.Inconclusive:
		fmt.Fprintln(w, "There are only 'skip'ped commits left to test.")
		fmt.Fprintln(w, "The first bad commit could be any of:")
		for _, c := range res.Candidates {
			subject := ""
			if info, err := g.Info(ctx, c); err == nil {
				subject = info.Subject
			}
			fmt.Fprintf(w, "%s %s\n", c, subject)
		}
		fmt.Fprintln(w, "We cannot bisect more!")
	case bisect.NotReproduced:
		fmt.Fprintf(w, "not reproduced: %s\n", res.Reason)
	}
}

// AddTo puts each tested commit's numbers and the confirmation into
// the JSON answer.
func (r *Run) AddTo(ctx context.Context, out *RunJSON) {
	for i := range out.Tested {
		if ev := r.evidence(out.Tested[i].Commit); ev != nil {
			out.Tested[i].Metric = metricJSONOf(ev)
		}
		if ev := r.searchEvidence(out.Tested[i].Commit); ev != nil {
			out.Tested[i].Metric = &MetricJSON{Name: ev.Metric, Kind: ev.Kind, Values: ev.Values, Median: noise.Tidy(ev.Kind, ev.Decision.Median),
				Reason: "the median of each boot's samples; " + r.searchCell(out.Tested[i].Commit)}
		}
	}
	out.Posterior = r.Search
	out.Stopped = r.Stopped
	out.Command = r.commandLine()
	if r.Calibration != nil && r.Calibration.Search != nil {
		s := r.Calibration.Search
		fg := &FindGoodJSON{Given: s.Given, From: s.From, Found: s.Found, Good: s.Good, Bad: s.Bad, Kernels: s.Kernels, Reason: s.Reason, Tried: []FindTryJSON{}}
		for _, t := range s.Tried {
			fg.Tried = append(fg.Tried, FindTryJSON{Tag: t.Tag, Commit: t.Commit, Verdict: t.Verdict, Reason: t.Reason, Median: t.Median, Seconds: t.Seconds})
		}
		out.FindGood = fg
	}
	if c := r.Confirmation; c != nil {
		out.Confirmed = &c.Confirmed
		out.Warnings = append(out.Warnings, c.Flags...)
		out.Confirmation = &ConfirmationJSON{Confirmed: c.Confirmed, WithParent: abCompareOf(c.WithParent), Reverted: abCompareOf(c.Reverted), Flags: c.Flags}
	}
}

func abCompareOf(res *lab.ABResult) *ABCompareJSON {
	if res == nil || res.Report == nil {
		return nil
	}
	p, c := res.Plan, res.Report.Comparison
	return &ABCompareJSON{SideA: ABSideJSON{p.A, p.ALabel}, SideB: ABSideJSON{p.B, p.BLabel}, Rounds: p.Rounds, Samples: p.Samples,
		Conclusion: res.Report.Conclusion, Direction: res.Report.Direction, P: c.P, Shift: c.Shift, ShiftLow: c.ShiftLow, ShiftHigh: c.ShiftHigh}
}

func metricJSONOf(ev *lab.Evidence) *MetricJSON {
	if len(ev.Values) == 0 {
		return &MetricJSON{Reason: ev.Reason, SameAs: ev.SameAs}
	}
	m := &MetricJSON{Name: ev.Metric, Kind: ev.Kind, Values: ev.Values, Reason: ev.Reason, SameAs: ev.SameAs}
	if ev.Decision != nil {
		m.Median, m.Threshold = noise.Tidy(ev.Kind, ev.Decision.Median), noise.Tidy(ev.Kind, ev.Decision.Threshold)
	}
	return m
}

// writeFlakyResult is the answer of a bisection of a flaky test: git's
// words with the probabilities.
func writeFlakyResult(ctx context.Context, w io.Writer, g *bisect.Graph, res bisect.Result) {
	runs := 0
	for _, t := range res.Tested {
		if t.Verdict != verdict.Skip {
			runs++
		}
	}
	switch res.Kind {
	case bisect.Found:
		fmt.Fprintf(w, "%s is the first bad commit, probability %.3f after %d runs\n", res.FirstBad, res.Probabilities[0], runs)
		if info, err := g.Info(ctx, res.FirstBad); err == nil {
			fmt.Fprintf(w, "commit %s\nAuthor: %s\nDate:   %s\n\n    %s\n", info.Hash, info.Author, info.Date, info.Subject)
		}
		fmt.Fprintf(w, "\nThe test fails on a bad commit about %.0f%% of the time.\n", 100*res.FailureRate)
	case bisect.Inconclusive:
		fmt.Fprintf(w, "No commit is the first bad one at the confidence asked after %d runs: %s.\n", runs, res.Reason)
		fmt.Fprintln(w, "The first bad commit could be any of:")
		for i, c := range res.Candidates {
			subject := ""
			if info, err := g.Info(ctx, c); err == nil {
				subject = info.Subject
			}
			fmt.Fprintf(w, "%s %.3f %s\n", c, res.Probabilities[i], subject)
		}
	case bisect.NotReproduced:
		fmt.Fprintf(w, "not reproduced: %s\n", res.Reason)
	}
}
