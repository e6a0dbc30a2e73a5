package simlab

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"kbisect/internal/simhost"
	"kbisect/internal/simnoise"
	"kbisect/internal/testrepo"
)

// Placement says where the planted regression lands.
type Placement int

// Placements.
const (
	Anywhere   Placement = iota // the seed chooses between the two below
	OnMainline                  // a commit of the mainline's first-parent history
	OnTopic                     // a commit of a topic or subsystem branch merged into the mainline
)

func (p Placement) String() string {
	switch p {
	case Anywhere:
		return "anywhere"
	case OnMainline:
		return "on the mainline"
	case OnTopic:
		return "on a topic branch"
	}
	return "placement " + strconv.Itoa(int(p))
}

// Options say which lab to make; the zero value is the default lab.
type Options struct {
	// Seed decides the history, the planted commits and the noise.
	Seed int64
	// Commits is how many commits the history has (0: 400; 60 to 5000).
	Commits int
	// Regression says where the regression is planted.
	Regression Placement
	// GoodNoise and BadNoise are the noise levels (the longest single
	// noise of a period) of the kernels before and after the regression,
	// in whole microseconds (0: 3 µs and 17 µs, the first seed report's;
	// from simhost.StormLevel up a kernel takes the report's interrupt
	// storm, ~49 ms of noise per 950 ms period).
	GoodNoise, BadNoise time.Duration
	// NoStorm keeps the hosts' isolated CPUs quiet whatever the level
	// (simhost's SetNoStorm): no kernel storms, and the job's verdict is
	// the longest single noise with a threshold between the levels, as
	// for two levels below simhost.StormLevel. 7 µs against 15 µs is
	// then a regression of the longest single noise alone.
	NoStorm bool
	// BrokenBuilds is how many breakages the history has (as many as
	// fit, up to it): a commit that does not compile and a later one on
	// its branch that fixes it (0: 2; negative: none). Merges of the
	// broken branch before the fix do not build either.
	BrokenBuilds int
	// BrokenBeforeRegression makes the regression's parent a commit that
	// does not build, fixed by the regression itself: a bisection cannot
	// tell the two apart and ends inconclusive, as git bisect's "could be
	// any of".
	BrokenBeforeRegression bool
	// DocPercent is the share of the other commits that change only
	// documentation, so build the same kernel as their parent (0: 15;
	// negative: none).
	DocPercent int
	// Duration is how long one sample of the lab's job measures (0: 10s;
	// the simulated host answers at once whatever it is).
	Duration time.Duration
	// OlderReleases is how many stable releases the mainline has below
	// the good endpoint (v6.12.56, v6.12.55, …), with the series' base
	// v6.12 at the first commit: a stable tree's history before the
	// range (0: none, and no v6.12 tag).
	OlderReleases int
	// RegressionBack plants the regression that many releases below the
	// good endpoint instead of between the endpoints: 1 between v6.12.56
	// and v6.12.57, 3 between v6.12.54 and v6.12.55. The good endpoint is
	// then bad, as in the first seed report (at most OlderReleases; 0:
	// between the endpoints).
	RegressionBack int
	// FirstStep, when set, makes the regression two steps (between
	// GoodNoise and BadNoise): the planted commit takes the noise from
	// GoodNoise to FirstStep, a later commit (Tree.Later) from
	// FirstStep on to BadNoise — a regression another adds to.
	FirstStep time.Duration
	// Noise is the noise real machines have (simnoise.Model): each boot
	// of the lab's hosts draws its level from it, at the booted kernel's
	// level or, for a bad boot, at the other side's (GoodNoise for a bad
	// kernel, BadNoise for a good one), and each measurement a sample of
	// that boot. Zero: the host's own model, as without it.
	Noise simnoise.Model
}

// Defaults of Options.
const (
	DefaultCommits   = 400
	DefaultGoodNoise = simhost.DefaultNoise
	DefaultBadNoise  = 17 * time.Microsecond
	DefaultBroken    = 2
	DefaultDocs      = 15
	DefaultDuration  = 10 * time.Second
)

// Validate fills the defaults in and says what is wrong.
func (o *Options) Validate() error {
	if o.Commits == 0 {
		o.Commits = DefaultCommits
	}
	if o.GoodNoise == 0 {
		o.GoodNoise = DefaultGoodNoise
	}
	if o.BadNoise == 0 {
		o.BadNoise = DefaultBadNoise
	}
	if o.BrokenBuilds == 0 {
		o.BrokenBuilds = DefaultBroken
	}
	if o.DocPercent == 0 {
		o.DocPercent = DefaultDocs
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if err := o.Noise.Validate(); err != nil {
		return fmt.Errorf("simlab: noise: %v", err)
	}
	switch {
	case o.Commits < 60 || o.Commits > 5000:
		return fmt.Errorf("simlab: %d commits: a history has 60 to 5000", o.Commits)
	case o.GoodNoise < time.Microsecond || o.GoodNoise%time.Microsecond != 0 || o.BadNoise%time.Microsecond != 0:
		return fmt.Errorf("simlab: noise levels %v and %v: whole microseconds, at least 1", o.GoodNoise, o.BadNoise)
	case o.BadNoise <= o.GoodNoise:
		return fmt.Errorf("simlab: the bad noise level %v is not above the good one %v", o.BadNoise, o.GoodNoise)
	case o.Regression < Anywhere || o.Regression > OnTopic:
		return fmt.Errorf("simlab: unknown placement %d", o.Regression)
	case o.DocPercent > 100:
		return fmt.Errorf("simlab: %d%% of commits changing documentation", o.DocPercent)
	case o.OlderReleases < 0 || o.OlderReleases > 40:
		return fmt.Errorf("simlab: %d older releases: 0 to 40", o.OlderReleases)
	case o.RegressionBack < 0 || o.RegressionBack > o.OlderReleases:
		return fmt.Errorf("simlab: the regression %d releases back needs as many older releases (have %d)", o.RegressionBack, o.OlderReleases)
	case o.RegressionBack > 0 && o.BrokenBeforeRegression:
		return fmt.Errorf("simlab: a regression below the good endpoint has no broken parent to plant")
	case o.FirstStep != 0 && !(o.FirstStep > o.GoodNoise && o.FirstStep < o.BadNoise && o.FirstStep%time.Microsecond == 0):
		return fmt.Errorf("simlab: a first step to %v: whole microseconds between the good level %v and the bad one %v", o.FirstStep, o.GoodNoise, o.BadNoise)
	case o.FirstStep != 0 && (o.RegressionBack > 0 || o.BrokenBeforeRegression):
		return fmt.Errorf("simlab: a regression in two steps is planted between the endpoints, after a parent that builds")
	case o.Duration < time.Second || o.Duration%time.Second != 0:
		return fmt.Errorf("simlab: a sample of %v: whole seconds, at least 1", o.Duration)
	}
	return nil
}

// Tree is a generated kernel tree and what is true of it.
type Tree struct {
	// Dir is the git repository; branch master is the newest release.
	Dir string
	// Commits are the commits by number, in the order they were made
	// (parents first); tags c<N> name them too.
	Commits  []string
	Subjects []string
	// Good and Bad are the endpoints, tags on the mainline
	// ("v6.12.57", "v6.12.78"); GoodCommit and BadCommit their commits.
	Good, Bad             string
	GoodCommit, BadCommit string
	// Releases are the tags of the mainline from Good to Bad; Older
	// those below Good, newest first, then the series' base v6.12.
	Releases []string
	Older    []string
	// Regression is the planted commit; OnMainline says whether it is
	// on the mainline's first-parent history (else on a merged branch).
	Regression string
	OnMainline bool
	// Later is the regression's second step (Options.FirstStep; "":
	// none), FirstStep the level between the two.
	Later     string
	FirstStep time.Duration
	// Broken are the commits whose kernel does not build, DocOnly those
	// that change only documentation, each in commit order.
	Broken  []string
	DocOnly []string
	// GoodNoise and BadNoise are the noise levels the kernels carry.
	GoodNoise, BadNoise time.Duration
	// Expected is what bisecting from Good to Bad must answer.
	Expected Expected

	bad, broken, later map[string]bool
}

// Expected is the answer of a bisection between a tree's endpoints, as
// git bisect gives it when every commit that does not build is skipped.
type Expected struct {
	// FirstBad is the first bad commit (the regression), when the
	// bisection can name one.
	FirstBad string
	// Candidates are the commits the first bad one could be: the
	// regression alone when FirstBad is set; else the regression and
	// the commits around it that do not build, which no test can tell
	// from it (git bisect's "could be any of").
	Candidates []string
}

// IsBad reports whether commit (a full hash) descends from the regression.
func (t *Tree) IsBad(commit string) bool { return t.bad[commit] }

// Builds reports whether the kernel of commit (a full hash) builds.
func (t *Tree) Builds(commit string) bool { return !t.broken[commit] }

// Noise returns the noise level the kernel of commit (a full hash) carries.
func (t *Tree) Noise(commit string) time.Duration {
	switch {
	case t.later[commit]:
		return t.BadNoise
	case t.bad[commit] && t.FirstStep > 0:
		return t.FirstStep
	case t.bad[commit]:
		return t.BadNoise
	}
	return t.GoodNoise
}

const firstSublevel = 57 // the good endpoint's

// NewTree writes a generated kernel tree into dir (made if missing; it
// must not hold a repository yet) and returns what is true of it.
func NewTree(dir string, opt Options) (*Tree, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("simlab: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return nil, fmt.Errorf("simlab: %s already holds a repository", dir)
	}
	p, err := newPlan(opt)
	if err != nil {
		return nil, err
	}
	subjects := p.subjects()
	for i := range p.h.Commits {
		p.h.Commits[i].Subject = subjects[i]
	}
	hashes, err := p.h.Write(dir, p.contents(opt))
	if err != nil {
		return nil, fmt.Errorf("simlab: writing the tree into %s: %v", dir, err)
	}
	t := &Tree{Dir: dir, Commits: hashes, Subjects: subjects, GoodNoise: opt.GoodNoise, BadNoise: opt.BadNoise,
		Regression: hashes[p.planted], OnMainline: p.onFP[p.planted], FirstStep: opt.FirstStep, bad: map[string]bool{}, broken: map[string]bool{}, later: map[string]bool{}}
	if p.later >= 0 {
		t.Later = hashes[p.later]
	}
	var refs strings.Builder
	for k, r := range p.releases {
		tag := fmt.Sprintf("v6.12.%d", firstSublevel+k)
		t.Releases = append(t.Releases, tag)
		fmt.Fprintf(&refs, "create refs/tags/%s %s\n", tag, hashes[r])
	}
	for k, r := range p.older {
		tag := fmt.Sprintf("v6.12.%d", firstSublevel-1-k)
		t.Older = append(t.Older, tag)
		fmt.Fprintf(&refs, "create refs/tags/%s %s\n", tag, hashes[r])
	}
	if len(p.older) > 0 {
		t.Older = append(t.Older, "v6.12")
		fmt.Fprintf(&refs, "create refs/tags/v6.12 %s\n", hashes[p.fp[0]])
	}
	if err := git(dir, refs.String(), "update-ref", "--stdin"); err != nil {
		return nil, err
	}
	t.Good, t.Bad = t.Releases[0], t.Releases[len(t.Releases)-1]
	t.GoodCommit, t.BadCommit = hashes[p.releases[0]], hashes[p.releases[len(p.releases)-1]]
	for i, hash := range hashes {
		if p.anc[i].Has(p.planted) {
			t.bad[hash] = true
		}
		if p.later >= 0 && p.anc[i].Has(p.later) {
			t.later[hash] = true
		}
		if p.broken[i] {
			t.broken[hash] = true
			t.Broken = append(t.Broken, hash)
		}
		if p.kinds[i] == kindDoc {
			t.DocOnly = append(t.DocOnly, hash)
		}
	}
	for _, c := range p.expected() {
		t.Expected.Candidates = append(t.Expected.Candidates, hashes[c])
	}
	if len(t.Expected.Candidates) == 1 {
		t.Expected.FirstBad = t.Expected.Candidates[0]
	}
	return t, nil
}

// What ordinary commits say they do.
var (
	changes = []string{"Fix a data race on the wakeup path", "Simplify the error path", "Remove an unused variable",
		"Use READ_ONCE() for the lockless check", "Avoid a double unlock on teardown", "Convert to guard(spinlock)",
		"Clean up the debug output", "Annotate a benign data race", "Rework the per-CPU cache", "Add a missing READ_ONCE()",
		"Fix a refcount leak on the error path", "Drop a stale comment", "Replace open-coded min()",
		"Fix a NULL dereference on probe", "Add a lockdep assertion", "Make the helper static"}
	docChanges = []string{"Fix typos", "Clarify the nohz_full requirements", "Update the isolation example",
		"Document the osnoise options", "Reword the defaults", "Fix the table layout", "Add a missing reference"}
)

// subjects names every commit as a kernel history would.
func (p *plan) subjects() []string {
	out := make([]string, len(p.h.Commits))
	releaseNo := map[int]int{}
	for k, r := range p.releases {
		releaseNo[r] = firstSublevel + k
	}
	for k, r := range p.older {
		releaseNo[r] = firstSublevel - 1 - k
	}
	mix := func(i, n int) int { return int((uint64(i)*2654435761 + uint64(n)) % uint64(n)) }
	branchName := func(c int) string {
		for ; p.files[c] == ""; c = p.h.Commits[c].Parents[0] {
			if len(p.h.Commits[c].Parents) == 0 {
				return "misc"
			}
		}
		return strings.TrimPrefix(area(p.files[c]), "Documentation: ")
	}
	for i, c := range p.h.Commits {
		switch p.kinds[i] {
		case kindRoot:
			out[i] = fmt.Sprintf("Import kbisect's simulated kernel at 6.12.%d", firstSublevel-1)
		case kindRelease:
			out[i] = fmt.Sprintf("Linux 6.12.%d", releaseNo[i])
		case kindRegression:
			out[i] = "eventpoll: Replace rwlock with spinlock"
		case kindLater:
			out[i] = "eventpoll: Hold ep->lock across the whole wakeup"
		case kindFix:
			out[i] = area(p.files[i]) + ": Fix the build (a missing semicolon)"
		case kindDoc:
			out[i] = area(p.files[i]) + ": " + docChanges[mix(i, len(docChanges))]
		case kindCode:
			out[i] = area(p.files[i]) + ": " + changes[mix(i, len(changes))]
		case kindMerge:
			switch {
			case len(c.Parents) > 2:
				var names []string
				for _, q := range c.Parents[1:] {
					names = append(names, "'"+branchName(q)+"'")
				}
				out[i] = "Merge branches " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
			case p.onFP[c.Parents[1]]:
				out[i] = "Merge branch 'master' into " + branchName(c.Parents[0])
			default:
				out[i] = "Merge branch '" + branchName(c.Parents[1]) + "'"
			}
		}
	}
	return out
}

// contents returns the tree of each commit: the build system, every source
// and documentation file with the lines its ancestors added.
func (p *plan) contents(opt Options) testrepo.Files {
	build := BuildFiles()
	delete(build, "Makefile")
	lines := map[string][]line{}
	for _, f := range append(append([]string{}, sources...), docs...) {
		lines[f] = nil
	}
	for i := range p.h.Commits {
		f := p.files[i]
		switch p.kinds[i] {
		case kindCode:
			l := line{commit: i, text: fmt.Sprintf("\nint %s_c%d(int x)\n{\n\treturn x + %d;\n}\n", symbol(f), i, i)}
			if fix, ok := p.breaks[i]; ok {
				l.text, l.fixed, l.fix = strings.Replace(l.text, ";\n}", "\n}", 1), l.text, fix
			}
			lines[f] = append(lines[f], l)
		case kindDoc:
			lines[f] = append(lines[f], line{commit: i, text: fmt.Sprintf("\nSee the note of change %d about isolated CPUs.\n", i)})
		case kindRegression:
			lines[f] = append(lines[f], line{commit: i, text: "\n/* ep->lock is a spinlock_t: on PREEMPT_RT an rt_mutex. */\nint ep_lock_is_spinlock(void)\n{\n\treturn 1;\n}\n", top: true})
		case kindLater:
			lines[f] = append(lines[f], line{commit: i, text: "\n/* ep_poll_callback holds ep->lock across the whole wakeup. */\nint ep_wakeup_locked(void)\n{\n\treturn 1;\n}\n", top: true})
		}
	}
	good := strconv.Itoa(int(opt.GoodNoise / time.Microsecond))
	bad := strconv.Itoa(int(opt.BadNoise / time.Microsecond))
	first := strconv.Itoa(int(opt.FirstStep / time.Microsecond))
	return func(i int) map[string]string {
		has := p.anc[i].Has
		out := make(map[string]string, len(build)+len(lines)+2)
		for k, v := range build {
			out[k] = v
		}
		sub := firstSublevel - 1 - len(p.older)
		for _, r := range append(p.older, p.releases...) {
			if has(r) {
				sub++
			}
		}
		out["Makefile"] = withSublevel(sub)
		out["README"] = "Linux kernel (kbisect's simulated tree)\n\nA tiny kernel-like tree for kbisect's tests and demo: make defconfig, make bzImage.\n"
		noise := good
		switch {
		case p.later >= 0 && has(p.later):
			noise = bad
		case has(p.planted) && opt.FirstStep > 0:
			noise = first
		case has(p.planted):
			noise = bad
		}
		for _, f := range sortedKeys(lines) {
			out[f] = fileContent(f, lines[f], has, noise)
		}
		return out
	}
}

// git runs git in dir with stdin.
func git(dir, stdin string, args ...string) error {
	c := exec.Command("git", append([]string{"-C", dir}, args...)...)
	c.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("simlab: git %s in %s: %v: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
