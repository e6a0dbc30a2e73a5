package bisect

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/verdict"
)

// GitLog renders a session log in the format of `git bisect log`, so that
// `git bisect replay` can take it up. result is the final step, if any.
// The subjects come from git, killed when ctx ends.
func GitLog(ctx context.Context, g *Graph, records []Record, result *Step) (string, error) {
	if len(records) == 0 || records[0].Event != EventStart {
		return "", fmt.Errorf("session log does not begin with a start record")
	}
	start := records[0]
	// The subjects with one git command (one per commit when that fails,
	// so that an unreadable commit leaves only its own subject blank).
	var hs []plumbing.Hash
	for _, r := range records {
		for _, sha := range append([]string{r.Bad, r.Commit}, r.Good...) {
			if h, ok := parseHex(sha); ok {
				hs = append(hs, h)
			}
		}
	}
	if result != nil {
		hs = append(append(hs, result.Commit), result.Candidates...)
	}
	hs = slices.DeleteFunc(hs, plumbing.Hash.IsZero)
	_, _ = g.Infos(ctx, hs) // when it fails, each comment reads its own

	var b strings.Builder
	comment := func(term, sha string) {
		subject := ""
		if h, ok := parseHex(sha); ok {
			if info, err := g.Info(ctx, h); err == nil {
				subject = info.Subject
			}
		}
		fmt.Fprintf(&b, "# %s: [%s] %s\n", term, sha, subject)
	}
	// The range as verdicts after a bare start: git 2.39's replay stops
	// for good at a start line whose range needs a merge base tested.
	writeStart := func(bad string, goods []string) {
		b.WriteString("git bisect start")
		if start.FirstParent {
			b.WriteString(" " + sqQuote("--first-parent"))
		}
		b.WriteString("\n")
		comment("bad", bad)
		fmt.Fprintf(&b, "git bisect bad %s\n", bad)
		for _, gd := range goods {
			comment("good", gd)
			fmt.Fprintf(&b, "git bisect good %s\n", gd)
		}
	}
	writeStart(start.Bad, start.Good)
	for _, r := range records[1:] {
		if r.Event == EventRange {
			// A new start: replay resets the bisection there too.
			b.WriteString("# the range changed: " + r.Note + "\n")
			writeStart(r.Bad, r.Good)
			continue
		}
		if r.Event != EventVerdict {
			continue
		}
		comment(string(r.Verdict), r.Commit)
		fmt.Fprintf(&b, "git bisect %s %s\n", r.Verdict, r.Commit)
	}
	if result != nil {
		switch result.Kind {
		case StepFound:
			comment("first bad commit", result.Commit.String())
		case StepInconclusive:
			b.WriteString("# only skipped commits left to test\n")
			for _, c := range result.Candidates {
				comment("possible first bad commit", c.String())
			}
		}
	}
	return b.String(), nil
}

// sqQuote quotes one word as git's sq_quote_buf does.
func sqQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// sqDequote splits a line of words quoted as git's sq_quote_argv writes them.
func sqDequote(s string) ([]string, error) {
	var out []string
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i == len(s) {
			return out, nil
		}
		var w strings.Builder
		for i < len(s) && s[i] != ' ' && s[i] != '\t' {
			switch {
			case s[i] == '\'':
				end := strings.IndexByte(s[i+1:], '\'')
				if end < 0 {
					return nil, fmt.Errorf("unterminated quote in %q", s)
				}
				w.WriteString(s[i+1 : i+1+end])
				i += end + 2
			case s[i] == '\\' && i+1 < len(s):
				w.WriteByte(s[i+1])
				i += 2
			default:
				w.WriteByte(s[i])
				i++
			}
		}
		out = append(out, w.String())
	}
}

// Replay is what a `git bisect log` says: the starting range and the
// verdicts given since, with revisions as written in the log.
type Replay struct {
	Bad         string
	Goods       []string
	FirstParent bool
	Marks       []ReplayMark
	// RangeOnStart says the start line named the bad and a good revision;
	// git then checks the range when the start is replayed, before the
	// verdicts, and otherwise only after them.
	RangeOnStart bool
}

// ReplayMark is one verdict line of a git bisect log.
type ReplayMark struct {
	Line    int
	Verdict verdict.Verdict
	Rev     string
}

// ParseGitLog reads a log written by `git bisect log` (or by kbisect).
// name is used in error messages.
func ParseGitLog(name string, r io.Reader) (*Replay, error) {
	rep := &Replay{}
	sc := bufio.NewScanner(r)
	line := 0
	started := false
	// git writes the range it resolved as comments before the start line
	// ("# bad: [<sha>] subject"): those are the commits, where the start
	// line may hold names such as HEAD that have moved since.
	var commentBad string
	var commentGoods []string
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if !started {
			if sha, ok := commentCommit(text, "# bad: ["); ok {
				commentBad = sha
			} else if sha, ok := commentCommit(text, "# good: ["); ok {
				commentGoods = append(commentGoods, sha)
			}
		}
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		rest, ok := strings.CutPrefix(text, "git bisect ")
		if !ok {
			rest, ok = strings.CutPrefix(text, "git-bisect ")
		}
		if !ok {
			continue // git's replay ignores other lines too
		}
		cmd, args, _ := strings.Cut(strings.TrimSpace(rest), " ")
		args = strings.TrimSpace(args)
		switch cmd {
		case "start":
			if started {
				// A new start (kbisect writes one when the range changed):
				// replay resets the bisection there, as git's does.
				*rep = Replay{}
			}
			words, err := sqDequote(args)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", name, line, err)
			}
			if err := rep.start(words); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", name, line, err)
			}
			if rep.Bad != "" && commentBad != "" && len(commentGoods) == len(rep.Goods) {
				rep.Bad, rep.Goods = commentBad, commentGoods
			}
			started = true
		case "good", "bad", "old", "new", "skip":
			if !started {
				return nil, fmt.Errorf("%s:%d: %q before \"git bisect start\"", name, line, text)
			}
			v, _ := verdict.Parse(cmd)
			for _, rev := range strings.Fields(args) {
				if v == verdict.Bad && rep.Bad == "" {
					rep.Bad = rev
					continue
				}
				if v == verdict.Good && rep.Bad == "" && len(rep.Marks) == 0 {
					rep.Goods = append(rep.Goods, rev)
					continue
				}
				rep.Marks = append(rep.Marks, ReplayMark{Line: line, Verdict: v, Rev: rev})
			}
		case "terms":
			return nil, fmt.Errorf("%s:%d: custom bisect terms are not supported; use good/bad or old/new", name, line)
		default:
			return nil, fmt.Errorf("%s:%d: unknown bisect command %q", name, line, cmd)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if !started {
		return nil, fmt.Errorf("%s: no \"git bisect start\" line: is this a git bisect log?", name)
	}
	if rep.Bad == "" {
		return nil, fmt.Errorf("%s: the log names no bad commit", name)
	}
	if len(rep.Goods) == 0 {
		// The range given as verdicts after an empty start: the first good
		// one starts it, the others are verdicts like any.
		for i, m := range rep.Marks {
			if m.Verdict == verdict.Good {
				rep.Goods = []string{m.Rev}
				rep.Marks = append(rep.Marks[:i:i], rep.Marks[i+1:]...)
				break
			}
		}
	}
	if len(rep.Goods) == 0 {
		return nil, fmt.Errorf("%s: the log names no good commit", name)
	}
	return rep, nil
}

func (rep *Replay) start(words []string) error {
	var revs []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "--":
			if i+1 < len(words) {
				return fmt.Errorf("path-limited bisection (%q) is not supported", strings.Join(words[i+1:], " "))
			}
			i = len(words)
		case w == "--first-parent":
			rep.FirstParent = true
		case w == "--no-checkout":
		case strings.HasPrefix(w, "--term-"):
			return fmt.Errorf("custom bisect terms (%s) are not supported", w)
		case strings.HasPrefix(w, "-"):
			return fmt.Errorf("unknown git bisect start option %q", w)
		default:
			revs = append(revs, w)
		}
	}
	if len(revs) > 0 {
		rep.Bad = revs[0]
		rep.Goods = append(rep.Goods, revs[1:]...)
	}
	rep.RangeOnStart = len(revs) > 1
	return nil
}

// commentCommit reads the commit of a "# bad: [<sha>] subject" line.
func commentCommit(line, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(line, prefix)
	if !ok || len(rest) < 41 || rest[40] != ']' {
		return "", false
	}
	if _, ok := parseHex(rest[:40]); !ok {
		return "", false
	}
	return rest[:40], true
}
