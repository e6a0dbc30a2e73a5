package bisect

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// Release is a release tag: vMAJOR.MINOR for a series' base (v6.12),
// vMAJOR.MINOR.PATCH for a stable release (v6.12.57), either with a
// flavour suffix such as -rt14 (the stable RT trees). Release
// candidates (-rc) are not releases.
type Release struct {
	Tag    string
	Commit plumbing.Hash
	Major  int
	Minor  int
	// Patch is the stable release number, -1 for the series' base.
	Patch int
	// Flavour is what follows the version ("rt14"), "" for none.
	Flavour string
}

var releaseTag = regexp.MustCompile(`^v(\d+)\.(\d+)(?:\.(\d+))?(?:-([a-z]+)(\d+))?$`)

// ParseRelease reads a tag name as a release; false when it is not one
// (an -rc, a branch-like tag, anything else).
func ParseRelease(tag string) (Release, bool) {
	m := releaseTag.FindStringSubmatch(tag)
	if m == nil || m[4] == "rc" {
		return Release{}, false
	}
	r := Release{Tag: tag, Patch: -1}
	r.Major, _ = strconv.Atoi(m[1])
	r.Minor, _ = strconv.Atoi(m[2])
	if m[3] != "" {
		r.Patch, _ = strconv.Atoi(m[3])
	}
	if m[4] != "" {
		r.Flavour = m[4] + m[5]
	}
	return r, true
}

// Series names the release's series: "6.12".
func (r Release) Series() string { return fmt.Sprintf("%d.%d", r.Major, r.Minor) }

// flavourKind is the flavour without its number ("rt14" → "rt").
func (r Release) flavourKind() string { return strings.TrimRight(r.Flavour, "0123456789") }

// compare orders releases by version, then flavour number.
func (r Release) compare(o Release) int {
	for _, d := range []int{r.Major - o.Major, r.Minor - o.Minor, r.Patch - o.Patch} {
		if d != 0 {
			return d
		}
	}
	a, _ := strconv.Atoi(strings.TrimLeft(r.Flavour, "abcdefghijklmnopqrstuvwxyz"))
	b, _ := strconv.Atoi(strings.TrimLeft(o.Flavour, "abcdefghijklmnopqrstuvwxyz"))
	return a - b
}

// CompareReleases orders releases by version, then flavour number
// (negative when a is older).
func CompareReleases(a, b Release) int { return a.compare(b) }

// Releases returns the repository's release tags peeled to their
// commits, newest version first.
func (g *Graph) Releases() ([]Release, error) {
	iter, err := g.repo.Tags()
	if err != nil {
		return nil, fmt.Errorf("list tags: %w", err)
	}
	var out []Release
	err = iter.ForEach(func(ref *plumbing.Reference) error {
		r, ok := ParseRelease(ref.Name().Short())
		if !ok {
			return nil
		}
		h, err := g.peel(r.Tag, ref.Hash())
		var re *RevisionError
		if errors.As(err, &re) {
			return nil // a tag of a tree or a blob, or of nothing here
		}
		if err != nil {
			return err
		}
		r.Commit = h
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b Release) int { return b.compare(a) })
	return out, nil
}

// IsAncestor reports whether a is an ancestor of b, or b itself.
func (g *Graph) IsAncestor(a, b plumbing.Hash) (bool, error) {
	ia, ib := g.id(a), g.id(b)
	for _, id := range []int32{ia, ib} {
		if err := g.parse(id); err != nil {
			return false, err
		}
	}
	return g.isAncestor(ia, ib)
}

// WalkBack is the plan for finding a good revision older than a good
// endpoint that measured bad: release tags of the endpoint's series,
// newest first with growing steps (1, 3, 7, 15 … releases back, as
// syzkaller walks release tags), then the series' base, then the bases
// of up to OlderSeries older series. Each is tried only if it is an
// ancestor of the last one that measured bad, which the caller checks
// with IsAncestor as it goes (NextCandidate does).
type WalkBack struct {
	// From is the release the walk starts below: the endpoint's own tag,
	// or the newest release that is its ancestor.
	From       Release
	Candidates []Release
}

// PlanWalkBack plans the walk back from endpoint (the commit the user
// gave as good, named rev). The candidates are only ordered here, by
// version; ancestry is checked as the walk goes, so a kernel history's
// thousands of tags cost no walk of the graph each.
func (g *Graph) PlanWalkBack(rev string, endpoint plumbing.Hash, olderSeries int) (*WalkBack, error) {
	all, err := g.Releases()
	if err != nil {
		return nil, err
	}
	var from Release
	i := slices.IndexFunc(all, func(r Release) bool { return r.Tag == rev && r.Commit == endpoint })
	ok := i >= 0 // else not a release, or a branch named like one
	if ok {
		from = all[i]
	}
	if !ok {
		// The newest release below the endpoint: those of the series its
		// Makefile names first (a stable tree has hundreds of newer tags
		// of other series), each checked with a walk of the graph.
		series, sub := g.makefileVersion(endpoint)
		mine := func(r Release) bool { return r.Series() == series && r.Patch <= sub }
		ordered := slices.Clone(all)
		slices.SortStableFunc(ordered, func(a, b Release) int {
			switch {
			case mine(a) && !mine(b):
				return -1
			case mine(b) && !mine(a):
				return 1
			}
			return 0
		})
		for i, r := range ordered {
			if i >= 400 {
				break
			}
			anc, err := g.IsAncestor(r.Commit, endpoint)
			if err != nil {
				return nil, err
			}
			if anc {
				from, ok = r, true
				break
			}
		}
	}
	if !ok {
		return nil, fmt.Errorf("no release tag (v6.12.57, v6.12, …) at or below %s: nothing to walk back along; give an older --good", rev)
	}
	w := &WalkBack{From: from}
	sameFlavour := func(r Release) bool { return r.flavourKind() == from.flavourKind() }
	// The series' stable releases below From, newest first.
	var stable []Release
	for _, r := range all {
		if r.Major == from.Major && r.Minor == from.Minor && r.Patch >= 0 && r.Patch < from.Patch && r.Commit != from.Commit && sameFlavour(r) {
			if len(stable) > 0 && stable[len(stable)-1].Patch == r.Patch {
				continue // an older -rtN of the same stable release
			}
			stable = append(stable, r)
		}
	}
	// Growing steps: 1, 3, 7, 15 … releases below From. An endpoint
	// above From (not itself a release) tries From first.
	if from.Commit != endpoint {
		w.Candidates = append(w.Candidates, from)
	}
	for off := 1; off <= len(stable); off = 2*off + 1 {
		w.Candidates = append(w.Candidates, stable[off-1])
	}
	// The bases: this series', then the older ones, newest first; the
	// flavoured base (v6.12-rt5) when the tree has one, else the plain.
	series := 0
	seen := map[string]bool{}
	for _, r := range all {
		newer := r.Major > from.Major || (r.Major == from.Major && r.Minor > from.Minor)
		tried := slices.ContainsFunc(w.Candidates, func(c Release) bool { return c.Commit == r.Commit })
		if r.Patch >= 0 || seen[r.Series()] || newer || r.Commit == endpoint || tried {
			continue
		}
		if r.Flavour != "" && !sameFlavour(r) {
			continue
		}
		if r.Flavour == "" && from.Flavour != "" && slices.ContainsFunc(all, func(o Release) bool {
			return o.Patch < 0 && o.Series() == r.Series() && o.Flavour != "" && sameFlavour(o)
		}) {
			continue // the flavoured base of this series is taken instead
		}
		if r.Series() != from.Series() {
			if series >= olderSeries {
				break
			}
			series++
		}
		seen[r.Series()] = true
		w.Candidates = append(w.Candidates, r)
	}
	return w, nil
}

// makefileVersion reads the series ("6.12") and SUBLEVEL a kernel
// commit's top Makefile says ("", -1 when it is no kernel's).
func (g *Graph) makefileVersion(h plumbing.Hash) (string, int) {
	c, err := g.repo.CommitObject(h)
	if err != nil {
		return "", -1
	}
	f, err := c.File("Makefile")
	if err != nil {
		return "", -1
	}
	text, err := f.Contents()
	if err != nil {
		return "", -1
	}
	var version, patchlevel, sublevel = -1, -1, -1
	for _, line := range strings.SplitN(text, "\n", 10) {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			continue
		}
		switch strings.TrimSpace(k) {
		case "VERSION":
			version = n
		case "PATCHLEVEL":
			patchlevel = n
		case "SUBLEVEL":
			sublevel = n
		}
	}
	if version < 0 || patchlevel < 0 {
		return "", -1
	}
	return fmt.Sprintf("%d.%d", version, patchlevel), sublevel
}
