package configs

import (
	"fmt"
	"sort"
	"strings"
)

// Pos is a place in a job file. Line and Col count from 1; zero means
// the whole file.
type Pos struct {
	File      string
	Line, Col int
}

func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Col == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Diagnostic is one problem found in a job file.
type Diagnostic struct {
	Pos Pos
	// Key is the dotted key the problem is about ("host.port",
	// "build.fragments[1]"); empty for a problem with the file itself.
	Key     string
	Msg     string
	Warning bool
}

func (d Diagnostic) String() string {
	var b strings.Builder
	b.WriteString(d.Pos.String())
	b.WriteString(": ")
	if d.Warning {
		b.WriteString("warning: ")
	}
	if d.Key != "" {
		b.WriteString(d.Key)
		b.WriteString(": ")
	}
	b.WriteString(d.Msg)
	return b.String()
}

// Errors is every error found in a job file (and the files it includes),
// in file and line order. Warnings found alongside are kept in Warnings.
type Errors struct {
	List     []Diagnostic
	Warnings []Diagnostic
	All      []Diagnostic // errors and warnings together, in order
}

func (e *Errors) Error() string {
	lines := make([]string, len(e.List))
	for i, d := range e.List {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// sortDiagnostics orders by file (the loaded file first, then its
// includes in the order they were read), line and column.
func sortDiagnostics(ds []Diagnostic, fileOrder map[string]int) {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Pos, ds[j].Pos
		if a.File != b.File {
			return fileOrder[a.File] < fileOrder[b.File]
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// closest returns the candidate nearest to s by edit distance when it is
// near enough to be a typo, or "".
func closest(s string, candidates []string) string {
	norm := func(x string) string { return strings.ReplaceAll(strings.ToLower(x), "-", "_") }
	best, bestDist := "", 1<<30
	for _, c := range candidates {
		d := editDistance(norm(s), norm(c))
		if d < bestDist {
			best, bestDist = c, d
		}
	}
	limit := 2
	if len(s) <= 4 {
		limit = 1
	}
	if bestDist <= limit || (bestDist <= len(s)/3 && bestDist <= 3) {
		return best
	}
	return ""
}

// editDistance is the optimal-string-alignment distance: insertions,
// deletions, substitutions and swaps of neighbours each cost one.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		return 1 << 20
	}
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
