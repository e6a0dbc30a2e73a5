package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/internal/atomicfile"
)

// runJSON is the --json answer, as in the design's contract.
type runJSON struct {
	Result     string       `json:"result"`
	FirstBad   string       `json:"first_bad,omitempty"`
	Candidates []string     `json:"candidates"`
	Steps      int          `json:"steps"`
	Tested     []testedJSON `json:"tested"`
	StateDir   string       `json:"state_dir"`
	Reason     string       `json:"reason,omitempty"`
	Warnings   []string     `json:"warnings,omitempty"`
	// Confirmed says, for run --job, whether the first bad commit and its
	// parent measured bad and good again on fresh boots.
	Confirmed *bool `json:"confirmed,omitempty"`
	// Confirmation is how, for run --job: the first bad commit against
	// its parent, and the bad endpoint against itself with the culprit
	// reverted, as kbisect ab compares.
	Confirmation *confirmationJSON `json:"confirmation,omitempty"`
	// FindGood is the walk back from a good endpoint that measured bad,
	// for run --job.
	FindGood *findGoodJSON `json:"find_good,omitempty"`
	// Command reproduces (or resumes) the run.
	Command string `json:"command,omitempty"`
	Error   string `json:"error,omitempty"`
}

// findGoodJSON is the walk back to a good release.
type findGoodJSON struct {
	Given   string        `json:"given"`
	From    string        `json:"from"`
	Found   string        `json:"found,omitempty"`
	Good    string        `json:"good,omitempty"`
	Bad     string        `json:"bad"`
	Kernels int           `json:"kernels"`
	Reason  string        `json:"reason"`
	Tried   []findTryJSON `json:"tried"`
}

type findTryJSON struct {
	Tag     string  `json:"tag"`
	Commit  string  `json:"commit"`
	Verdict string  `json:"verdict"`
	Reason  string  `json:"reason"`
	Median  float64 `json:"median,omitempty"`
	Seconds float64 `json:"seconds"`
}

type confirmationJSON struct {
	Confirmed  bool           `json:"confirmed"`
	WithParent *abCompareJSON `json:"with_parent,omitempty"`
	Reverted   *abCompareJSON `json:"reverted,omitempty"`
	Flags      []string       `json:"flags,omitempty"`
}

// abCompareJSON is one A/B comparison of a confirmation.
type abCompareJSON struct {
	SideA      abSideJSON `json:"a"`
	SideB      abSideJSON `json:"b"`
	Rounds     int        `json:"rounds"`
	Samples    int        `json:"samples"`
	Conclusion string     `json:"conclusion"`
	Direction  string     `json:"direction,omitempty"`
	P          float64    `json:"p"`
	Shift      float64    `json:"shift"`
	ShiftLow   float64    `json:"shift_low"`
	ShiftHigh  float64    `json:"shift_high"`
}

type testedJSON struct {
	Commit  string      `json:"commit"`
	Verdict string      `json:"verdict"`
	Seconds float64     `json:"seconds"`
	Source  string      `json:"source,omitempty"`
	Metric  *metricJSON `json:"metric,omitempty"`
}

// metricJSON is what a kernel measured, for run --job: the samples'
// values of the job's metric, their median, the rule's threshold, and why
// the verdict is what it is.
type metricJSON struct {
	Name      string    `json:"name,omitempty"`
	Kind      string    `json:"kind,omitempty"`
	Values    []float64 `json:"values,omitempty"`
	Median    float64   `json:"median,omitempty"`
	Threshold float64   `json:"threshold,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	SameAs    string    `json:"same_as,omitempty"`
}

// saveReports writes git-bisect.log and result.json into the state dir.
func saveReports(g *bisect.Graph, log *bisect.StateLog, res bisect.Result, out runJSON) error {
	dir := log.Dir()
	text, err := bisect.GitLog(g, log.Records(), res.Final)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "git-bisect.log"), []byte(text)); err != nil {
		return err
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "result.json"), append(b, '\n'))
}

func toJSON(res bisect.Result, dir string, runErr error) runJSON {
	out := runJSON{Result: string(res.Kind), Candidates: []string{}, Tested: []testedJSON{}, StateDir: dir, Reason: res.Reason, Warnings: res.Warnings}
	if res.Kind == bisect.Found {
		out.FirstBad = res.FirstBad.String()
	}
	for _, c := range res.Candidates {
		out.Candidates = append(out.Candidates, c.String())
	}
	for _, t := range res.Tested {
		out.Tested = append(out.Tested, testedJSON{Commit: t.Commit.String(), Verdict: t.Verdict.String(), Seconds: t.Seconds, Source: t.Source})
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

func writeRunJSON(w io.Writer, out runJSON) {
	b, _ := json.MarshalIndent(out, "", "  ")
	fmt.Fprintf(w, "%s\n", b)
}

func printResult(w io.Writer, g *bisect.Graph, res bisect.Result) {
	for _, msg := range res.Warnings {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
	switch res.Kind {
	case bisect.Found:
		fmt.Fprintf(w, "%s is the first bad commit\n", res.FirstBad)
		if info, err := g.Info(res.FirstBad); err == nil {
			fmt.Fprintf(w, "commit %s\nAuthor: %s\nDate:   %s\n\n    %s\n", info.Hash, info.Author, info.Date, info.Subject)
		}
	case bisect.Inconclusive:
		fmt.Fprintln(w, "There are only 'skip'ped commits left to test.")
		fmt.Fprintln(w, "The first bad commit could be any of:")
		for _, c := range res.Candidates {
			subject := ""
			if info, err := g.Info(c); err == nil {
				subject = info.Subject
			}
			fmt.Fprintf(w, "%s %s\n", c, subject)
		}
		fmt.Fprintln(w, "We cannot bisect more!")
	case bisect.NotReproduced:
		fmt.Fprintf(w, "not reproduced: %s\n", res.Reason)
	}
}

// textProgress prints plain progress lines, as git bisect does.
type textProgress struct {
	w io.Writer
	g *bisect.Graph
}

func (p *textProgress) Testing(step bisect.Step) {
	if step.MergeBase {
		fmt.Fprintln(p.w, "Bisecting: a merge base must be tested")
	} else {
		fmt.Fprintf(p.w, "Bisecting: %d revision%s left to test after this (roughly %d step%s)\n",
			step.Left, plural(step.Left), step.Estimate, plural(step.Estimate))
	}
	subject := ""
	if info, err := p.g.Info(step.Commit); err == nil {
		subject = info.Subject
	}
	fmt.Fprintf(p.w, "[%s] %s\n", step.Commit, subject)
}

func (p *textProgress) Tested(commit plumbing.Hash, out bisect.Outcome, elapsed time.Duration) {
	fmt.Fprintf(p.w, "%s is %s (%s, %.1fs)\n", commit.String()[:12], out.Verdict, out.Note, elapsed.Seconds())
}

func (p *textProgress) Warn(msg string) { fmt.Fprintf(p.w, "warning: %s\n", msg) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
