package run

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"kbisect/bisect"
	"kbisect/internal/atomicfile"
	"kbisect/internal/commitid"
	"kbisect/internal/usage"
	"kbisect/lab"
	"kbisect/report"
	"kbisect/verdict"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// bisection is what both kinds of run keep open: the graph, the session
// log in the state directory, and the session restored from it.
type bisection struct {
	g        *bisect.Graph
	log      *bisect.StateLog
	stateDir string
	sess     *bisect.Session
}

// openState opens the state directory dir (made absolute) and its
// session log, and returns the records it holds.
func (b *bisection) openState(dir string) ([]bisect.Record, error) {
	var err error
	if b.stateDir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	log, records, err := bisect.OpenState(b.stateDir)
	if err != nil {
		return nil, err
	}
	b.log = log
	return records, nil
}

// close closes the log and the graph (when the result has not taken it).
func (b *bisection) close() {
	if b.log != nil {
		b.log.Close()
	}
	if b.g != nil {
		b.g.Close()
	}
}

// resolveRange turns the flags (or the replayed log) into the start record
// and the replayed verdicts.
func resolveRange(g *bisect.Graph, o Range, exec string) (bisect.Record, []bisect.Record, error) {
	start := bisect.Record{Event: bisect.EventStart, FirstParent: o.FirstParent, Meta: map[string]string{"exec": exec}}
	badRev, goodRevs := o.Bad, o.Goods
	var marks []bisect.Record
	if o.Replay != "" {
		data, err := os.ReadFile(o.Replay)
		if err != nil {
			return start, nil, usage.Errorf("--replay: %v", err)
		}
		rep, err := bisect.ParseGitLog(o.Replay, bytes.NewReader(data))
		if err != nil {
			return start, nil, usage.Errorf("--replay: %v", err)
		}
		sum := sha256.Sum256(data)
		start.Meta["replay"], start.Meta["replay_sha256"] = o.Replay, hex.EncodeToString(sum[:])
		start.Meta["replay_range_on_start"] = strconv.FormatBool(rep.RangeOnStart)
		badRev, goodRevs = rep.Bad, rep.Goods
		start.FirstParent = start.FirstParent || rep.FirstParent
		for _, m := range rep.Marks {
			h, err := g.Resolve(m.Rev)
			if err != nil {
				return start, nil, usage.Errorf("%s:%d: %v", o.Replay, m.Line, err)
			}
			marks = append(marks, bisect.Record{Event: bisect.EventVerdict, Commit: h.String(), Verdict: m.Verdict, Source: "replay"})
		}
	}
	bad, err := g.Resolve(badRev)
	if err != nil {
		return start, nil, usage.Errorf("--bad %s: %v", badRev, err)
	}
	start.Bad, start.BadRev = bad.String(), badRev
	var goods []string
	for _, rev := range goodRevs {
		h, err := g.Resolve(rev)
		if err != nil {
			return start, nil, usage.Errorf("--good %s: %v", rev, err)
		}
		if !slices.Contains(goods, h.String()) {
			goods = append(goods, h.String())
		}
	}
	slices.Sort(goods)
	start.Good, start.GoodRevs = goods, goodRevs
	return start, marks, nil
}

// runID names the default state directory: the same range, command and
// replayed log give the same directory, so the same command resumes.
func runID(start bisect.Record, exec string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%v\x00%s\x00%s", start.Bad, strings.Join(start.Good, " "), start.FirstParent, exec, start.Meta["replay_sha256"])
	if start.Meta["flaky"] != "" {
		// Another kind of bisection: another directory. Any confidence
		// takes the same runs as evidence.
		fmt.Fprint(h, "\x00flaky")
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// sameRun checks that a state directory holds this bisection: the same
// range, the same command, and no new log to replay into it.
func sameRun(have, want bisect.Record, dir string) error {
	if have.Bad != want.Bad || !slices.Equal(have.Good, want.Good) || have.FirstParent != want.FirstParent {
		return usage.Errorf("state directory %s holds another bisection (bad %s, good %s, first-parent %v); give another --state, or remove it to start over",
			dir, have.Bad, strings.Join(have.Good, " "), have.FirstParent)
	}
	if have.Meta["exec"] != want.Meta["exec"] {
		return usage.Errorf("state directory %s holds verdicts of another test command (--exec %s); give another --state, or remove it to start over",
			dir, sqQuoteShell(have.Meta["exec"]))
	}
	if have.Meta["flaky"] != want.Meta["flaky"] {
		kind := map[string]string{"": "git's exact bisection", "true": "a bisection of a flaky test (--confidence)"}
		return usage.Errorf("state directory %s holds runs of %s; give another --state, or remove it to start over", dir, kind[have.Meta["flaky"]])
	}
	if have.Meta["replay_sha256"] != want.Meta["replay_sha256"] {
		return usage.Errorf("state directory %s holds this range with other replayed verdicts; give another --state, or remove it to start over", dir)
	}
	return nil
}

func countVerdicts(records []bisect.Record) int {
	n := 0
	for _, r := range records {
		if r.Event == bisect.EventVerdict {
			n++
		}
	}
	return n
}

// FileSHA256 is the hex SHA-256 of a file: what guards a state
// directory against another job file.
func FileSHA256(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// saveResult writes git-bisect.log and result.json into the state dir.
func saveResult(ctx context.Context, g *bisect.Graph, log *bisect.StateLog, res bisect.Result, out report.RunJSON) error {
	dir := log.Dir()
	text, err := bisect.GitLog(ctx, g, log.Records(), res.Final)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "git-bisect.log"), []byte(text)); err != nil {
		return err
	}
	return writeResultJSON(dir, out)
}

// writeResultJSON writes result.json into the state dir.
func writeResultJSON(dir string, out report.RunJSON) error {
	b, err := report.MarshalJSON(out)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "result.json"), append(b, '\n'))
}

// baseFile is where a state directory keeps the base command line of a
// machine's test kernels, recorded at the run's first boot there and read
// again on resume (machine "": the run's only one).
func baseFile(dir, machine string) string {
	if machine == "" {
		return filepath.Join(dir, "base-cmdline.json")
	}
	return filepath.Join(dir, "base-cmdline-"+FileSafe(machine)+".json")
}

// retrySkips readies the state directory to measure its skipped commits
// again: the session log's skips (not those of a replayed log, which
// kbisect did not measure) and the lab's (lab.RetrySkips).
func (b *bisection) retrySkips(messages io.Writer) error {
	dropped, err := b.log.Drop(func(r bisect.Record) bool {
		return r.Event == bisect.EventVerdict && r.Verdict == verdict.Skip && r.Source != "replay"
	})
	if err != nil {
		return err
	}
	commits, err := lab.RetrySkips(b.stateDir)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var names []string
	for _, c := range commits {
		seen[c] = true
		names = append(names, commitid.Short(c))
	}
	for _, r := range dropped {
		if !seen[r.Commit] {
			seen[r.Commit] = true
			names = append(names, commitid.Short(r.Commit))
		}
	}
	if len(names) == 0 {
		fmt.Fprintf(messages, "kbisect: --retry-skips: no commit was skipped\n")
		return nil
	}
	fmt.Fprintf(messages, "kbisect: --retry-skips: %d skipped commit(s) measured again: %s\n", len(names), strings.Join(names, " "))
	return nil
}
