package simlab

import (
	"fmt"
	"math/rand/v2"
	"sort"

	"kbisect/internal/testrepo"
)

// What a commit of the generated history does.
type kind int

const (
	kindCode       kind = iota // adds a function to a C file
	kindDoc                    // adds a line to a documentation file
	kindMerge                  // merges branches, adds nothing
	kindRoot                   // the first commit: the tree as it starts
	kindRelease                // bumps SUBLEVEL
	kindRegression             // changes the noise level of fs/eventpoll.c
	kindFix                    // fixes a broken commit's line
	kindLater                  // the second step: changes the noise level again
)

// plan is the generated history with what each commit does.
type plan struct {
	h        *testrepo.History
	anc      []testrepo.Set
	kinds    []kind
	files    []string // the file a code or doc commit changes
	onFP     []bool   // on the mainline's first-parent history
	fp       []int    // that history, oldest first
	releases []int    // good endpoint first, bad endpoint last
	older    []int    // releases below the good endpoint, newest first
	planted  int
	// later is the regression's second step (Options.FirstStep; -1:
	// none), a commit after it.
	later  int
	breaks map[int]int // broken commit → its fix
	broken []bool
}

// newPlan generates the history and decides what each commit does.
func newPlan(opt Options) (*plan, error) {
	rng := rand.New(rand.NewPCG(uint64(opt.Seed), 0x6b62697365637421))
	h := testrepo.Generate(opt.Seed, testrepo.Shape{Commits: opt.Commits - 1, Subsystems: 3, Octopus: true, SkewPercent: 3, TiePercent: 3})
	// The newest release, on top of the mainline.
	last := int64(0)
	for _, c := range h.Commits {
		last = max(last, c.Date)
	}
	h.Commits = append(h.Commits, testrepo.Commit{Parents: []int{h.Mainline}, Date: last + 600})
	h.Mainline = len(h.Commits) - 1
	n := len(h.Commits)
	p := &plan{h: h, anc: h.Ancestors(), kinds: make([]kind, n), files: make([]string, n), onFP: make([]bool, n),
		breaks: map[int]int{}, broken: make([]bool, n), later: -1}
	for c := h.Mainline; ; c = h.Commits[c].Parents[0] {
		p.fp = append([]int{c}, p.fp...)
		p.onFP[c] = true
		if len(h.Commits[c].Parents) == 0 {
			break
		}
	}
	for i, c := range h.Commits {
		switch {
		case len(c.Parents) == 0:
			p.kinds[i] = kindRoot
		case len(c.Parents) > 1:
			p.kinds[i] = kindMerge
		case rng.IntN(100) < opt.DocPercent:
			p.kinds[i], p.files[i] = kindDoc, docs[rng.IntN(len(docs))]
		default:
			p.kinds[i], p.files[i] = kindCode, sources[rng.IntN(len(sources))]
		}
	}
	p.chooseReleases(opt.OlderReleases)
	if len(p.older) < opt.OlderReleases {
		return nil, fmt.Errorf("simlab: seed %d, %d commits: room for %d older releases, not %d: give more commits", opt.Seed, opt.Commits, len(p.older), opt.OlderReleases)
	}
	if err := p.plant(rng, opt); err != nil {
		return nil, err
	}
	if opt.FirstStep > 0 {
		if err := p.plantLater(rng, opt); err != nil {
			return nil, err
		}
	}
	if opt.BrokenBuilds > 0 {
		p.breakBuilds(rng, opt.BrokenBuilds)
	}
	return p, nil
}

// chooseReleases makes the endpoints and up to 20 releases between them
// on the mainline: the good endpoint a tenth of the way in, the bad one
// the newest commit. With older releases, the good endpoint is half way
// in and they are spread below it, newest first.
func (p *plan) chooseReleases(older int) {
	from := len(p.fp) / 10
	if older > 0 {
		from = len(p.fp) / 2
	}
	var plain []int // ordinary commits of the mainline after a tenth of it
	for k, c := range p.fp {
		if k >= from && k > 0 && k < len(p.fp)-1 && (p.kinds[c] == kindCode || p.kinds[c] == kindDoc) {
			plain = append(plain, c)
		}
	}
	if older > 0 {
		var below []int // ordinary commits of the mainline below the good endpoint
		for k, c := range p.fp {
			if k > 0 && k < from && (p.kinds[c] == kindCode || p.kinds[c] == kindDoc) {
				below = append(below, c)
			}
		}
		older = min(older, len(below)/2)
		for j := 0; j < older; j++ {
			// Evenly spaced, each with commits of its own above it.
			r := below[len(below)-1-((j+1)*len(below))/(older+1)]
			p.older = append(p.older, r)
			p.kinds[r], p.files[r] = kindRelease, ""
		}
	}
	tip := p.fp[len(p.fp)-1]
	if len(plain) == 0 {
		p.releases = []int{p.fp[0], tip} // cannot happen with 60 commits or more
	} else {
		// Releases take at most half of the mainline's own commits:
		// the other half may carry the regression.
		between := plain[1:]
		m := min(20, len(between)/2)
		p.releases = []int{plain[0]}
		for j := 0; j < m; j++ {
			p.releases = append(p.releases, between[(2*j+1)*len(between)/(2*m)])
		}
		p.releases = append(p.releases, tip)
	}
	for _, r := range p.releases {
		p.kinds[r], p.files[r] = kindRelease, ""
	}
}

// inRange reports whether c is between the endpoints: an ancestor of the
// bad one, not of the good one.
func (p *plan) inRange(c int) bool {
	return p.anc[p.releases[len(p.releases)-1]].Has(c) && !p.anc[p.releases[0]].Has(c)
}

// plant chooses the regression: an ordinary commit between the endpoints,
// away from both, where opt says.
func (p *plan) plant(rng *rand.Rand, opt Options) error {
	var mainline, topic []int
	inRange := p.inRange
	if n := opt.RegressionBack; n > 0 {
		if n > len(p.older) {
			return fmt.Errorf("simlab: seed %d, %d commits: room for %d older releases, not %d", opt.Seed, opt.Commits, len(p.older), n)
		}
		upper, lower := p.releases[0], p.older[n-1]
		if n > 1 {
			upper = p.older[n-2]
		}
		inRange = func(c int) bool { return p.anc[upper].Has(c) && !p.anc[lower].Has(c) }
	}
	for c := range p.h.Commits {
		if !inRange(c) || (p.kinds[c] != kindCode && p.kinds[c] != kindDoc) {
			continue
		}
		if p.onFP[c] {
			mainline = append(mainline, c)
		} else {
			topic = append(topic, c)
		}
	}
	where := opt.Regression
	if where == Anywhere {
		where = OnMainline
		if rng.IntN(2) == 1 {
			where = OnTopic
		}
	}
	pools := [][]int{mainline, topic}
	if where == OnTopic {
		pools = [][]int{topic, mainline}
	}
	if opt.Regression != Anywhere {
		pools = pools[:1]
	}
	for _, pool := range pools {
		// Away from the endpoints: the middle 60 % of the candidates.
		pool = pool[len(pool)/5 : len(pool)-len(pool)/5]
		for _, k := range rng.Perm(len(pool)) {
			c := pool[k]
			if !opt.BrokenBeforeRegression {
				p.setRegression(c)
				return nil
			}
			// The regression's parent does not build; the regression
			// fixes it. The breakage is the parent itself, or a branch
			// the parent merges.
			b := p.breakBefore(c)
			if b < 0 {
				continue
			}
			kind, file := p.kinds[c], p.files[c]
			p.setRegression(c)
			if set, ok := p.breakage(b, c, 30, true); ok {
				if p.kinds[b] == kindDoc {
					p.kinds[b], p.files[b] = kindCode, sources[rng.IntN(len(sources))]
				}
				p.addBreakage(b, c, set)
				return nil
			}
			p.kinds[c], p.files[c] = kind, file
		}
	}
	what := "the regression"
	if opt.BrokenBeforeRegression {
		what = "the regression after a commit that does not build"
	}
	return fmt.Errorf("simlab: seed %d, %d commits: no commit can be %s %v: try another seed or more commits",
		opt.Seed, opt.Commits, what, opt.Regression)
}

// breakBefore returns the commit that can break the build of c's parent:
// the parent when it is an ordinary commit between the endpoints, else
// the first such commit a merge parent merges (-1: none).
func (p *plan) breakBefore(c int) int {
	parent := p.h.Commits[c].Parents[0]
	for _, q := range append([]int{parent}, p.h.Commits[parent].Parents...) {
		if (p.kinds[q] == kindCode || p.kinds[q] == kindDoc) && p.inRange(q) && (q == parent || p.kinds[parent] == kindMerge) {
			return q
		}
	}
	return -1
}

// plantLater chooses the regression's second step: an ordinary commit
// after the regression (on the mainline where it can), between the
// endpoints, away from both ends of those.
func (p *plan) plantLater(rng *rand.Rand, opt Options) error {
	var after, mainline []int
	for c := range p.h.Commits {
		if c != p.planted && p.anc[c].Has(p.planted) && p.inRange(c) && (p.kinds[c] == kindCode || p.kinds[c] == kindDoc) {
			after = append(after, c)
			if p.onFP[c] {
				mainline = append(mainline, c)
			}
		}
	}
	if len(mainline) >= 5 {
		after = mainline
	}
	if len(after) < 5 {
		return fmt.Errorf("simlab: seed %d, %d commits: no room for a second step after the regression: try another seed or more commits", opt.Seed, opt.Commits)
	}
	pool := after[len(after)/5 : len(after)-len(after)/5]
	p.later = pool[rng.IntN(len(pool))]
	p.kinds[p.later], p.files[p.later] = kindLater, eventpoll
	return nil
}

func (p *plan) setRegression(c int) {
	p.planted = c
	p.kinds[c], p.files[c] = kindRegression, eventpoll
}

// breakBuilds plants up to count breakages: an ordinary commit that does
// not compile, fixed by the commit one or two later on its branch, with
// every commit in between (merges of it included) broken too.
func (p *plan) breakBuilds(rng *rand.Rand, count int) {
	children := make([][]int, len(p.h.Commits)) // by first parent
	for c, commit := range p.h.Commits {
		if len(commit.Parents) > 0 {
			children[commit.Parents[0]] = append(children[commit.Parents[0]], c)
		}
	}
	tip := p.releases[len(p.releases)-1]
	made := 0
	for _, b := range rng.Perm(len(p.h.Commits)) {
		if made == count {
			return
		}
		if p.kinds[b] != kindCode || !p.inRange(b) || b == p.h.Commits[p.planted].Parents[0] {
			continue
		}
		f, depth := b, 1+rng.IntN(2)
		for step := 0; step < depth && f >= 0; step++ {
			next := -1
			for _, c := range children[f] {
				if p.anc[tip].Has(c) && (p.kinds[c] == kindCode || p.kinds[c] == kindDoc) {
					next = c
					break
				}
			}
			f = next
		}
		if _, taken := p.breaks[b]; taken || f < 0 || !p.anc[tip].Has(f) {
			continue
		}
		if _, taken := p.breaks[f]; taken {
			continue // broken already: it cannot be a fix too
		}
		if set, ok := p.breakage(b, f, 6, false); ok {
			p.addBreakage(b, f, set)
			made++
		}
	}
}

// breakage returns the commits a breakage at b fixed by f leaves
// broken, and whether that is acceptable: at most limit commits, none of
// them an endpoint, a release, the regression or (unless nearRegression)
// its parent, nor a commit another breakage already breaks.
func (p *plan) breakage(b, f, limit int, nearRegression bool) ([]int, bool) {
	var set []int
	forbidden := map[int]bool{p.planted: true}
	if p.later >= 0 {
		forbidden[p.later], forbidden[p.h.Commits[p.later].Parents[0]] = true, true
	}
	if !nearRegression {
		forbidden[p.h.Commits[p.planted].Parents[0]] = true
	}
	for _, r := range p.releases {
		forbidden[r] = true
	}
	for c := range p.h.Commits {
		if p.anc[c].Has(b) && !p.anc[c].Has(f) {
			if forbidden[c] || p.broken[c] || len(set) == limit {
				return nil, false
			}
			set = append(set, c)
		}
	}
	return set, len(set) > 0
}

func (p *plan) addBreakage(b, f int, set []int) {
	p.breaks[b] = f
	if p.kinds[f] != kindRegression {
		p.kinds[f], p.files[f] = kindFix, p.files[b]
	}
	for _, c := range set {
		p.broken[c] = true
	}
}

// expected returns the commits a bisection from the good endpoint to the
// bad one ends with, as git bisect does when it skips every commit that
// does not build: the regression, and every commit that does not build,
// is an ancestor of the regression between the endpoints, and is an
// ancestor of no commit there that builds (every such commit is good, and
// is tested or is the ancestor of one tested).
func (p *plan) expected() []int {
	out := []int{p.planted}
	in := func(c int) bool { return p.anc[p.planted].Has(c) && !p.anc[p.releases[0]].Has(c) && c != p.planted }
	for c := range p.h.Commits {
		if !p.broken[c] || !in(c) {
			continue
		}
		hidden := false
		for x := range p.h.Commits {
			if in(x) && !p.broken[x] && p.anc[x].Has(c) {
				hidden = true
				break
			}
		}
		if !hidden {
			out = append(out, c)
		}
	}
	sort.Ints(out)
	return out
}
