// Package bisect owns the search for the first bad commit: the commit
// graph read with go-git (and the commit-graph file when there is one),
// the candidates, the midpoint git bisect would choose (the same commits
// in the same order, merges, skips and --first-parent included), the
// session that takes verdicts and says what to test next, the session log
// in the state directory (appended and synced before the next step) and
// its export to "git bisect log", and the release tags a walk back to a
// good release tries.
//
// It takes a tester as a function and knows nothing of kernels, SSH or
// measurements. It may import verdict and the internal helper packages
// only.
package bisect
