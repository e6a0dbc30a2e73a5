// Package testrepo generates git histories for tests: merge-heavy
// commit graphs shaped like a kernel's (a mainline, subsystem trees that
// merge their own topic branches, back-merges, octopus and criss-cross
// merges, equal and skewed commit dates), written into real repositories
// with git fast-import.
package testrepo

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Commit is one commit of a generated history.
type Commit struct {
	Parents []int
	Date    int64
	Subject string
}

// History is a generated commit graph; commits are numbered in creation
// order, so parents always come first.
type History struct {
	Commits []Commit
	// Mainline is the newest mainline commit.
	Mainline int
	// Heads are the branch tips left unmerged at the end.
	Heads []int
}

// Shape says which merges a generated history has.
type Shape struct {
	Commits     int
	Octopus     bool
	CrissCross  bool
	Subsystems  int
	SkewPercent int // percent of commits whose date is older than the clock
	TiePercent  int // percent of commits sharing the previous commit's date
}

type branch struct {
	head  int
	base  int // index into branches of the branch it merges into; -1 for mainline
	topic bool
}

// Generate makes a history of the given shape; the same seed gives the same
// history.
func Generate(seed int64, s Shape) *History {
	rng := rand.New(rand.NewSource(seed))
	h := &History{}
	clock := int64(1_700_000_000)
	add := func(subject string, parents ...int) int {
		switch r := rng.Intn(100); {
		case r < s.TiePercent:
		case r < s.TiePercent+s.SkewPercent:
			clock += int64(1 + rng.Intn(5))
			h.Commits = append(h.Commits, Commit{Parents: parents, Date: clock - int64(60+rng.Intn(600)), Subject: subject})
			return len(h.Commits) - 1
		default:
			clock += int64(1 + rng.Intn(120))
		}
		h.Commits = append(h.Commits, Commit{Parents: parents, Date: clock, Subject: subject})
		return len(h.Commits) - 1
	}
	branches := []*branch{{head: add("mainline: initial"), base: -1}}
	for i := 0; i < s.Subsystems; i++ {
		branches = append(branches, &branch{head: add(fmt.Sprintf("subsys%d: start", i), branches[0].head), base: 0})
	}
	for len(h.Commits) < s.Commits {
		r := rng.Intn(100)
		switch {
		case r < 45: // a commit on some branch
			b := branches[rng.Intn(len(branches))]
			b.head = add(fmt.Sprintf("change %d", len(h.Commits)), b.head)
		case r < 58: // a new topic off mainline or a subsystem
			base := 0
			if s.Subsystems > 0 && rng.Intn(3) > 0 {
				base = 1 + rng.Intn(s.Subsystems)
			}
			branches = append(branches, &branch{head: add(fmt.Sprintf("topic %d: first", len(h.Commits)), branches[base].head), base: base, topic: true})
		case r < 78: // a topic merged where it came from
			t := pickTopic(rng, branches)
			if t < 0 {
				continue
			}
			into := branches[branches[t].base]
			into.head = add(fmt.Sprintf("Merge topic %d", branches[t].head), into.head, branches[t].head)
			branches = append(branches[:t], branches[t+1:]...)
		case r < 86 && s.Subsystems > 0: // a subsystem pulled into mainline
			sub := branches[1+rng.Intn(s.Subsystems)]
			branches[0].head = add(fmt.Sprintf("Merge subsystem at %d", sub.head), branches[0].head, sub.head)
		case r < 90 && s.Subsystems > 0: // a back-merge of mainline into a subsystem
			sub := branches[1+rng.Intn(s.Subsystems)]
			sub.head = add("Merge mainline into subsystem", sub.head, branches[0].head)
		case r < 94 && s.Octopus: // an octopus of topics into mainline
			var heads []int
			for i := len(branches) - 1; i > 0 && len(heads) < 3; i-- {
				if branches[i].topic && branches[i].base == 0 {
					heads = append(heads, branches[i].head)
					branches = append(branches[:i], branches[i+1:]...)
				}
			}
			if len(heads) < 2 {
				for _, hd := range heads {
					branches = append(branches, &branch{head: hd, base: 0, topic: true})
				}
				continue
			}
			branches[0].head = add("Octopus merge", append([]int{branches[0].head}, heads...)...)
		case r < 97 && s.CrissCross && s.Subsystems > 1: // criss-cross between two subsystems
			a, b := branches[1], branches[2]
			oldA := a.head
			a.head = add("Merge subsys1 into subsys0", a.head, b.head)
			b.head = add("Merge subsys0 into subsys1", b.head, oldA)
		default:
			branches[0].head = add(fmt.Sprintf("mainline %d", len(h.Commits)), branches[0].head)
		}
	}
	h.Mainline = branches[0].head
	for _, b := range branches[1:] {
		h.Heads = append(h.Heads, b.head)
	}
	return h
}

func pickTopic(rng *rand.Rand, branches []*branch) int {
	var topics []int
	for i, b := range branches {
		if b.topic {
			topics = append(topics, i)
		}
	}
	if len(topics) == 0 {
		return -1
	}
	return topics[rng.Intn(len(topics))]
}

// Ancestors returns, for every commit, the set of its ancestors including
// itself.
func (h *History) Ancestors() []Set {
	anc := make([]Set, len(h.Commits))
	for i, c := range h.Commits {
		s := NewSet(len(h.Commits))
		s.Add(i)
		for _, p := range c.Parents {
			s.Union(anc[p])
		}
		anc[i] = s
	}
	return anc
}

// Set is a set of commit numbers.
type Set []uint64

// NewSet makes an empty set for n commits.
func NewSet(n int) Set { return make(Set, (n+63)/64) }

// Add puts i in the set.
func (s Set) Add(i int) { s[i/64] |= 1 << (i % 64) }

// Has reports whether i is in the set.
func (s Set) Has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }

// Union adds every member of o.
func (s Set) Union(o Set) {
	for i := range o {
		s[i] |= o[i]
	}
}

// Files gives the tracked files of commit i; nil means a single file
// naming the commit.
type Files func(i int) map[string]string

// Write creates a repository in dir holding the history, with branch
// "master" at the mainline and, for histories of up to 5,000 commits, tags
// c<N> for every commit; it returns the commit names by number.
func (h *History) Write(dir string, files Files) ([]string, error) {
	if err := run(dir, "git", "init", "-q", "-b", "master"); err != nil {
		return nil, err
	}
	marks := filepath.Join(dir, ".git", "marks")
	cmd := exec.Command("git", "fast-import", "--quiet", "--export-marks="+marks)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(stdin, 1<<20)
	for i, c := range h.Commits {
		if len(c.Parents) == 0 {
			fmt.Fprintf(w, "reset refs/heads/build\n")
		}
		fmt.Fprintf(w, "commit refs/heads/build\nmark :%d\n", i+1)
		fmt.Fprintf(w, "author Test Author <author@example.org> %d +0000\n", c.Date)
		fmt.Fprintf(w, "committer Test Committer <committer@example.org> %d +0000\n", c.Date)
		msg := fmt.Sprintf("%s\n\nc%d\n", c.Subject, i)
		fmt.Fprintf(w, "data %d\n%s", len(msg), msg)
		for j, p := range c.Parents {
			if j == 0 {
				fmt.Fprintf(w, "from :%d\n", p+1)
			} else {
				fmt.Fprintf(w, "merge :%d\n", p+1)
			}
		}
		fmt.Fprintf(w, "deleteall\n")
		fs := map[string]string{"id": fmt.Sprintf("c%d\n", i)}
		if files != nil {
			fs = files(i)
		}
		names := make([]string, 0, len(fs))
		for n := range fs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n%s\n", n, len(fs[n]), fs[n])
		}
	}
	fmt.Fprintf(w, "reset refs/heads/master\nfrom :%d\n\n", h.Mainline+1)
	for i := range h.Commits {
		if len(h.Commits) > 5000 {
			break
		}
		fmt.Fprintf(w, "reset refs/tags/c%d\nfrom :%d\n\n", i, i+1)
	}
	fmt.Fprintf(w, "reset refs/heads/build\n\n")
	werr := w.Flush()
	stdin.Close()
	if err := cmd.Wait(); err != nil || werr != nil {
		return nil, fmt.Errorf("git fast-import: %v %v: %s", err, werr, stderr.String())
	}
	data, err := os.ReadFile(marks)
	if err != nil {
		return nil, err
	}
	os.Remove(marks)
	hashes := make([]string, len(h.Commits))
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var n int
		var sha string
		if _, err := fmt.Sscanf(line, ":%d %s", &n, &sha); err != nil {
			return nil, fmt.Errorf("marks line %q: %v", line, err)
		}
		hashes[n-1] = sha
	}
	if err := run(dir, "git", "checkout", "-q", "-f", "master"); err != nil {
		return nil, err
	}
	return hashes, nil
}

func run(dir string, argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, out)
	}
	return nil
}

// Regression plants a regression in the history: its culprit is the first
// commit past the middle that the mainline contains, and every commit
// that has it as an ancestor is bad. Each commit's file "state" says
// "good" or "bad", so `grep -q good state` is the test that finds it;
// files adds the commit's other files (nil: none).
func (h *History) Regression(dir string, files Files) (hashes []string, culprit int, err error) {
	anc := h.Ancestors()
	culprit = len(h.Commits) / 2
	for !anc[h.Mainline].Has(culprit) {
		culprit++
	}
	hashes, err = h.Write(dir, func(i int) map[string]string {
		fs := map[string]string{}
		if files != nil {
			fs = files(i)
		}
		fs["state"] = "good"
		if anc[i].Has(culprit) {
			fs["state"] = "bad"
		}
		return fs
	})
	return hashes, culprit, err
}
