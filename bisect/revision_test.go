package bisect

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"kbisect/internal/testrepo"
)

func TestResolveNamesCommitsAsGitDoes(t *testing.T) {
	h := testrepo.Generate(11, testrepo.Shape{Commits: 2500, Subsystems: 3, Octopus: true})
	dir := t.TempDir()
	hashes, err := h.Write(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "-c", "user.name=T", "-c", "user.email=t@e", "tag", "-a", "-m", "release", "v1.0", hashes[100])
	gitIn(t, dir, "branch", "topic", hashes[200])
	gitIn(t, dir, "update-ref", "ORIG_HEAD", hashes[300])
	g, err := OpenGraph(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()

	var merge, octopus int = -1, -1
	for i, c := range h.Commits {
		if len(c.Parents) == 2 && merge < 0 && i > 1000 {
			merge = i
		}
		if len(c.Parents) > 2 && octopus < 0 {
			octopus = i
		}
	}
	if merge < 0 || octopus < 0 {
		t.Fatal("history without merges")
	}
	firstParents := func(i, n int) int {
		for ; n > 0; n-- {
			i = h.Commits[i].Parents[0]
		}
		return i
	}
	cases := map[string]string{
		"c42":                         hashes[42],
		"master":                      hashes[h.Mainline],
		"HEAD":                        hashes[h.Mainline],
		"topic":                       hashes[200],
		"heads/topic":                 hashes[200],
		"refs/tags/c7":                hashes[7],
		"v1.0":                        hashes[100],
		hashes[300]:                   hashes[300],
		strings.ToUpper(hashes[9]):    hashes[9],
		"c2000~5":                     hashes[firstParents(2000, 5)],
		"c2000~":                      hashes[firstParents(2000, 1)],
		fmt.Sprintf("c%d^", merge):    hashes[h.Commits[merge].Parents[0]],
		fmt.Sprintf("c%d^2", merge):   hashes[h.Commits[merge].Parents[1]],
		fmt.Sprintf("c%d^3", octopus): hashes[h.Commits[octopus].Parents[2]],
		fmt.Sprintf("c%d^2~2", merge): hashes[firstParents(h.Commits[merge].Parents[1], 2)],
		"c50^0":                       hashes[50],
	}
	// A short hash that is unique.
	for n := 7; n < 40; n++ {
		prefix := hashes[1234][:n]
		if strings.Count(strings.Join(hashes, " "), prefix) == 1 {
			cases[prefix] = hashes[1234]
			break
		}
	}
	for rev, want := range cases {
		got, err := g.Resolve(rev)
		if err != nil {
			t.Errorf("Resolve(%q): %v", rev, err)
			continue
		}
		if got.String() != want {
			t.Errorf("Resolve(%q) = %s, want %s", rev, got, want)
		}
	}
}

func TestResolveRejectsAmbiguousAndWrongRevisions(t *testing.T) {
	h := testrepo.Generate(12, testrepo.Shape{Commits: 2500, Subsystems: 2})
	dir := t.TempDir()
	hashes, err := h.Write(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := OpenGraph(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()

	// With 2,500 commits some share their first four hex digits.
	seen := map[string]string{}
	var prefix, a, b string
	for _, hs := range hashes {
		if other, ok := seen[hs[:4]]; ok {
			prefix, a, b = hs[:4], other, hs
			break
		}
		seen[hs[:4]] = hs
	}
	if prefix == "" {
		t.Fatal("no shared 4-digit prefix in 2,500 commits")
	}
	_, err = g.Resolve(prefix)
	if err == nil {
		t.Fatalf("Resolve(%q) accepted an ambiguous prefix", prefix)
	}
	for _, want := range []string{"ambiguous", a, b, "more hex digits"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ambiguity error does not mention %q:\n%v", want, err)
		}
	}

	tree := gitIn(t, dir, "rev-parse", "master^{tree}")
	root, single := -1, -1
	for i, c := range h.Commits {
		if len(c.Parents) == 0 && root < 0 {
			root = i
		}
		if len(c.Parents) == 1 && single < 0 {
			single = i
		}
	}
	wrong := map[string]string{
		"no-such-branch":             "no such branch, tag or commit",
		fmt.Sprintf("c%d~1", root):   "generations",
		fmt.Sprintf("c%d^2", single): "no parent 2",
		tree:                         "not a commit",
		"":                           "empty revision",
	}
	for rev, want := range wrong {
		_, err := g.Resolve(rev)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Resolve(%q) = %v, want an error about %q", rev, err, want)
		}
	}
}
