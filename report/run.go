package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/internal/commitid"
	"kbisect/internal/wrap"
	"kbisect/lab"
	"kbisect/noise"
	"kbisect/verdict"
)

// Run is what a run --job found and why, read from its state
// directory: what run prints at its end, and kbisect report at any time.
type Run struct {
	Graph        *bisect.Graph
	Job          *configs.Job // nil for run --exec
	StateDir     string
	Start        bisect.Record
	Result       bisect.Result // Kind "" while in progress
	Calibration  *lab.Calibration
	Confirmation *lab.Confirmation
	// Search is where a posterior search stands (nil for the rule's).
	Search *lab.SearchSummary
	// Stopped is, for a run with no answer that nobody runs now, when it
	// stopped and how it is resumed.
	Stopped *StoppedJSON
}

// StoppedJSON is a run that stopped before its answer: killed, or
// interrupted.
type StoppedJSON struct {
	// At is the time of the last thing it wrote.
	At time.Time `json:"at"`
	// Resume is the command that made it, which resumes it ("" when an
	// older kbisect did not keep it).
	Resume string `json:"resume,omitempty"`
}

func (s *StoppedJSON) String() string {
	resume := "the command that made it resumes it"
	if s.Resume != "" {
		resume = "resume it with: " + s.Resume
	}
	return fmt.Sprintf("stopped at %s, not running: no answer yet; %s", s.At.Local().Format("2006-01-02 15:04:05 MST"), resume)
}

// evidence returns what the state directory holds for a commit (nil when
// nothing).
func (r *Run) evidence(commit string) *lab.Evidence {
	ev, err := lab.ReadEvidence(r.StateDir, commit)
	if err != nil {
		return nil
	}
	return ev
}

// runRow is one tested kernel in the report.
type runRow struct {
	commit  plumbing.Hash
	verdict verdict.Verdict
	from    rowSource
	ev      *lab.Evidence
	subject string
	when    int64
}

// rowSource says where a row's verdict comes from.
type rowSource uint8

// The sources of a row.
const (
	// fromBisection: a commit the bisection tested.
	fromBisection rowSource = iota
	// fromEndpoint: an endpoint as calibration measured it.
	fromEndpoint
	// fromWalk: a release tried on the walk back to a good one.
	fromWalk
)

// label is the row's verdict as the markdown table writes it: "good",
// "bad (endpoint)", "skip (walk)".
func (rw runRow) label() string {
	switch rw.from {
	case fromEndpoint:
		return string(rw.verdict) + " (endpoint)"
	case fromWalk:
		return string(rw.verdict) + " (walk)"
	}
	return string(rw.verdict)
}

// mark is the row's verdict as the text report writes it: an endpoint
// marked *, a release of the walk +.
func (rw runRow) mark() string {
	switch rw.from {
	case fromEndpoint:
		return string(rw.verdict) + "*"
	case fromWalk:
		return string(rw.verdict) + "+"
	}
	return string(rw.verdict)
}

// rows are the tested commits, endpoints included, in history order
// (oldest first: by commit time, ancestors before descendants).
func (r *Run) rows(ctx context.Context) []runRow {
	var rows []runRow
	add := func(commit string, v verdict.Verdict, from rowSource, ev *lab.Evidence) {
		h, ok := bisect.ParseHash(commit)
		if !ok {
			return
		}
		rows = append(rows, runRow{commit: h, verdict: v, from: from, ev: ev})
	}
	if r.Calibration != nil {
		// An endpoint as it measured: a good one may be bad.
		measured := func(ev *lab.Evidence, def verdict.Verdict) verdict.Verdict {
			if ev != nil && ev.Verdict != "" {
				return ev.Verdict
			}
			return def
		}
		add(r.Start.Bad, measured(r.Calibration.Bad, verdict.Bad), fromEndpoint, r.Calibration.Bad)
		if s := r.Calibration.Search; s != nil {
			add(s.Given, verdict.Bad, fromEndpoint, r.evidence(s.Given)) // as the walk found it
			for _, t := range s.Tried {
				if t.Median != 0 || t.Verdict != verdict.Skip || r.evidence(t.Commit) != nil {
					add(t.Commit, t.Verdict, fromWalk, r.evidence(t.Commit))
				}
			}
		} else {
			add(r.Start.Good[0], measured(r.Calibration.Good, verdict.Good), fromEndpoint, r.Calibration.Good)
		}
	}
	for _, t := range r.Result.Tested {
		ev := r.evidence(t.Commit.String())
		if r.Search != nil {
			ev = r.searchEvidence(t.Commit.String())
		}
		add(t.Commit.String(), t.Verdict, fromBisection, ev)
	}
	hs := make([]plumbing.Hash, len(rows))
	for i := range rows {
		hs[i] = rows[i].commit
	}
	infos, _ := r.Graph.Infos(ctx, hs)
	for i := range rows {
		rows[i].subject = infos[rows[i].commit].Subject
		rows[i].when, _ = r.Graph.CommitTime(rows[i].commit)
	}
	slices.SortStableFunc(rows, func(a, b runRow) int { return int(a.when - b.when) })
	// Commits of one second (a series applied with git am) go ancestors
	// first.
	for i := 0; i < len(rows); {
		j := i
		for j < len(rows) && rows[j].when == rows[i].when {
			j++
		}
		r.ancestorsFirst(rows[i:j])
		i = j
	}
	return rows
}

// ancestorsFirst orders rows of one commit time so that no runRow comes
// before one of its ancestors.
func (r *Run) ancestorsFirst(rows []runRow) {
	for i := range rows {
		// The first of the rest with no ancestor among the rest.
		for k := i; k < len(rows); k++ {
			free := true
			for m := i; m < len(rows) && free; m++ {
				free = m == k || !r.isAncestor(rows[m].commit, rows[k].commit)
			}
			if free {
				rows[i], rows[k] = rows[k], rows[i]
				break
			}
		}
	}
}

// isAncestor says whether a is a proper ancestor of b.
func (r *Run) isAncestor(a, b plumbing.Hash) bool {
	ok, err := r.Graph.IsAncestor(a, b)
	return err == nil && ok && a != b
}

// numbers is a kernel's median and range, as its metric prints them.
func numbers(ev *lab.Evidence) string {
	if ev == nil || len(ev.Values) == 0 {
		return "-"
	}
	lo, hi := slices.Min(ev.Values), slices.Max(ev.Values)
	med := lo
	if ev.Decision != nil {
		med = ev.Decision.Median
	}
	los, his := noise.FormatValue(ev.Kind, lo), noise.FormatValue(ev.Kind, hi)
	for _, unit := range []string{" µs", " ns", " s", "%"} {
		if strings.HasSuffix(los, unit) && strings.HasSuffix(his, unit) {
			los = strings.TrimSuffix(los, unit) // "10–13 µs"
			break
		}
	}
	return fmt.Sprintf("%s [%s–%s] n=%d", noise.FormatValue(ev.Kind, med), los, his, len(ev.Values))
}

// medianOf is a kernel's median and sample count.
func medianOf(ev *lab.Evidence) string {
	if ev == nil || len(ev.Values) == 0 {
		return "-"
	}
	med := slices.Min(ev.Values)
	if ev.Decision != nil {
		med = ev.Decision.Median
	}
	return fmt.Sprintf("%s n=%d", noise.FormatValue(ev.Kind, med), len(ev.Values))
}

// para writes prose folded to a mail's width.
func para(w io.Writer, first, rest, format string, args ...any) {
	fmt.Fprintln(w, wrap.Lines(fmt.Sprintf(format, args...), wrap.Width, first, rest))
}

// fit cuts s to n columns, with an ellipsis.
func fit(s string, n int) string {
	r := []rune(s)
	if n < 2 || len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// WriteText writes the report in text: the answer as git prints it, the
// confirmation, the tested kernels with their numbers, and the two
// kernels on either side of the answer compared, with their per-CPU
// tables.
func (r *Run) WriteText(ctx context.Context, w io.Writer) {
	if r.Search != nil && r.Result.Kind == bisect.Inconclusive {
		r.writeCandidates(ctx, w)
	} else {
		WriteGitResult(ctx, w, r.Graph, r.Result)
	}
	switch {
	case r.Result.Kind == "" && r.Stopped != nil:
		fmt.Fprintln(w, r.Stopped)
	case r.Result.Kind == "":
		fmt.Fprintln(w, "in progress: no answer yet")
	}
	if s := r.posteriorText(); s != "" {
		fmt.Fprintln(w)
		para(w, "", "", "%s", s)
	}
	if s := r.search(); s != "" {
		fmt.Fprintln(w)
		para(w, "", "", "%s", s)
	}
	if c := r.Confirmation; c != nil {
		fmt.Fprintln(w)
		if c.Confirmed {
			para(w, "", "", "Confirmed on fresh boots: first bad %s, its parent %s.", numbers(c.Culprit), numbers(c.Parent))
		} else {
			para(w, "", "", "NOT confirmed on fresh boots: read the flags before trusting this commit.")
		}
		if c.WithParent != nil && c.WithParent.Report != nil {
			para(w, "- ", "  ", "Against its parent, %d boots a side, alternating: %s", c.WithParent.Plan.Rounds, c.WithParent.Report.Conclusion)
		}
		if c.Reverted != nil && c.Reverted.Report != nil {
			para(w, "- ", "  ", "The bad endpoint against itself with it reverted (%s): %s", commitid.Short(c.Reverted.Plan.B), c.Reverted.Report.Conclusion)
		}
		for _, f := range c.Flags {
			para(w, "flag: ", "      ", "%s", f)
		}
	}
	if rows := r.rows(ctx); len(rows) > 0 {
		// The median only, to keep to a mail's width: the ranges are in
		// the markdown, JSON and HTML reports.
		if r.Search != nil {
			fmt.Fprintln(w)
			para(w, "", "", "Tested kernels, oldest first (%s: the median of the boots' medians, the boots, and the probability that the kernel is bad):", r.metricName())
		} else {
			fmt.Fprintf(w, "\nTested kernels, oldest first (%s: the median of n samples):\n", r.metricName())
		}
		width := 0
		for _, rw := range rows {
			cell := medianOf(rw.ev)
			if sc := r.searchCell(rw.commit.String()); sc != "" && rw.ev != nil {
				cell = fmt.Sprintf("%s, %s", noise.FormatValue(rw.ev.Kind, noise.Median(rw.ev.Values)), sc)
			}
			width = max(width, len([]rune(cell)))
		}
		for _, rw := range rows {
			cell := medianOf(rw.ev)
			if sc := r.searchCell(rw.commit.String()); sc != "" && rw.ev != nil {
				cell = fmt.Sprintf("%s, %s", noise.FormatValue(rw.ev.Kind, noise.Median(rw.ev.Values)), sc)
			}
			line := fmt.Sprintf("  %s %-5s %-*s", rw.commit.String()[:12], rw.mark(), width, cell)
			fmt.Fprintf(w, "%s %s\n", line, fit(rw.subject, wrap.Width-len([]rune(line))-1))
			if rw.ev != nil && (len(rw.ev.Values) == 0 || rw.ev.SameAs != "") {
				para(w, "               ", "               ", "%s", rw.ev.Reason)
			}
		}
		fmt.Fprintln(w, "  (* an endpoint, measured before bisecting)")
		if r.Calibration != nil && r.Calibration.Search != nil {
			fmt.Fprintln(w, "  (+ a release measured walking back from the good endpoint)")
		}
	}
	good, bad := r.pair()
	if good == nil || bad == nil {
		return
	}
	rep, err := r.compare(good, bad)
	if err != nil {
		return
	}
	fmt.Fprintf(w, "\nA: %s\nB: %s\n", rep.A.Name, rep.B.Name)
	_ = WriteABSummary(w, shortNames(rep))
	for _, ev := range []*lab.Evidence{good, bad} {
		fmt.Fprintln(w)
		para(w, "", "", "%s (%s), the sample with the median %s:", ev.Commit[:12], ev.Release, ev.Metric)
		_ = WriteTable(w, MedianSample(ev))
	}
	if r.Result.Kind == bisect.NotReproduced {
		fmt.Fprintf(w, "\nThe endpoints' samples and raw outputs are in %s; to measure them again, remove the state directory or give another --state.\n", filepath.Join(r.StateDir, "commits"))
	}
	writeSetup(w, r.Job)
	para(w, "Reproduce: ", "  ", "%s", r.commandLine())
}

// search says in a paragraph that the good endpoint measured bad, what
// the walk back measured, what it cost and the range it left ("" when
// there was no walk).
func (r *Run) search() string {
	if r.Calibration == nil || r.Calibration.Search == nil {
		return ""
	}
	s := r.Calibration.Search
	var tried []string
	for _, t := range s.Tried {
		tried = append(tried, t.Tag+" "+string(t.Verdict))
	}
	given := commitid.Short(s.Given)
	for _, gr := range r.Start.GoodRevs {
		if h, err := r.Graph.Resolve(gr); err == nil && h.String() == s.Given {
			given = gr
		}
	}
	text := fmt.Sprintf("The good endpoint %s measured bad, so the regression is older than it. Walking back along the releases below %s cost %d kernels (%s)",
		given, s.From, s.Kernels, strings.Join(tried, ", "))
	if s.Found == "" {
		return text + ": " + s.Reason + "."
	}
	bad := commitid.Short(s.Bad)
	for _, t := range s.Tried {
		if t.Commit == s.Bad {
			bad = t.Tag
		}
	}
	switch {
	case s.Bad == s.Given:
		bad = given
	case s.Bad == r.Start.Bad && r.Start.BadRev != "":
		bad = r.Start.BadRev // the posterior search: to the bad endpoint
	}
	return fmt.Sprintf("%s; the bisection ran from %s (good) to %s (bad).", text, s.Found, bad)
}

func (r *Run) metricName() string {
	if r.Job != nil {
		return r.Job.Verdict.Metric
	}
	return "metric"
}

// pair is the good and bad kernels the report compares: the last good
// and the first bad commit, or the endpoints when not reproduced.
func (r *Run) pair() (good, bad *lab.Evidence) {
	switch {
	case r.Result.Kind == bisect.Found && r.Confirmation != nil && r.Confirmation.Culprit.Commit == r.Result.FirstBad.String():
		// Measured again with more samples on fresh boots: the better
		// evidence.
		bad, good = r.Confirmation.Culprit, r.Confirmation.Parent
	case r.Result.Kind == bisect.Found:
		bad = r.evidence(r.Result.FirstBad.String())
		good = r.lastGood()
	case r.Result.Kind == bisect.NotReproduced && r.Calibration != nil:
		good, bad = r.Calibration.Good, r.Calibration.Bad
	}
	if good == nil || bad == nil || len(good.Samples) == 0 || len(bad.Samples) == 0 {
		return nil, nil
	}
	return good, bad
}

func (r *Run) compare(good, bad *lab.Evidence) (*noise.ABReport, error) {
	if r.Job == nil {
		return nil, errors.New("no job file in the state directory")
	}
	if c := r.Confirmation; c != nil && c.WithParent != nil && c.WithParent.Report != nil && c.Culprit == bad {
		return c.WithParent.Report, nil // the boots of the confirmation, as kbisect ab compares
	}
	goodName, badName := "last good ", "first bad "
	if r.Result.Kind == bisect.NotReproduced {
		goodName, badName = "good endpoint ", "bad endpoint "
	}
	return noise.CompareAB(noise.Side{Name: goodName + good.Commit[:12], Samples: good.Samples},
		noise.Side{Name: badName + bad.Commit[:12], Samples: bad.Samples},
		r.Job.Verdict.Metric, r.Job.Verdict.Aggregate, r.Job.Verdict.Confidence)
}

// lastGood is the good kernel next to the first bad commit: its parent
// when that was tested good, else the good commit tested last, else the
// good endpoint.
func (r *Run) lastGood() *lab.Evidence {
	if parents, err := r.Graph.Parents(r.Result.FirstBad); err == nil && len(parents) > 0 {
		if ev := r.evidence(parents[0].String()); ev != nil && ev.Verdict == verdict.Good && len(ev.Samples) > 0 {
			return ev
		}
	}
	for i := len(r.Result.Tested) - 1; i >= 0; i-- {
		if r.Result.Tested[i].Verdict == verdict.Good {
			if ev := r.evidence(r.Result.Tested[i].Commit.String()); ev != nil && len(ev.Samples) > 0 {
				return ev
			}
		}
	}
	if r.Calibration != nil {
		return r.Calibration.Good
	}
	return nil
}

// MedianSample is the sample whose value is the median of the commit's.
func MedianSample(ev *lab.Evidence) *noise.Measurement {
	idx := make([]int, len(ev.Values))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case ev.Values[a] < ev.Values[b]:
			return -1
		case ev.Values[a] > ev.Values[b]:
			return 1
		}
		return 0
	})
	i := idx[len(idx)/2]
	if i < len(ev.Samples) {
		return ev.Samples[i]
	}
	return ev.Samples[len(ev.Samples)-1]
}

// commandLine is the kbisect command that makes (or resumes) the run:
// with --find-good when the run walked back.
func (r *Run) commandLine() string {
	c := runCommandLine(r.Start)
	if r.Calibration != nil && r.Calibration.Search != nil {
		c += " --find-good"
	}
	return c
}
