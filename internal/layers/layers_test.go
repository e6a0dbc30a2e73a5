package layers

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "kbisect"

// rule is what one package must not know about: kbisect packages it must
// not import directly, and (for the packages at the bottom) not even
// through another.
type rule struct {
	// mayImport lists every kbisect package the package may import
	// directly; nil means only what forbid leaves.
	mayImport []string
	// forbid lists packages it must not import, directly or through
	// others.
	forbid []string
}

// internals are the small helper packages anyone may use; verdict, the
// one verdict type, is a leaf like them.
var internals = []string{"internal/cpulist", "internal/shell", "internal/wrap", "internal/usage", "internal/tty", "internal/commitid", "internal/atomicfile", "internal/statefile", "internal/tartree", "internal/simnoise", "verdict"}

// testSupport is what only tests, the demo and simulate may reach.
var testSupport = []string{"internal/simlab", "internal/simhost", "internal/sshtest", "internal/testrepo"}

func only(pkgs ...string) []string { return append(slices.Clone(internals), pkgs...) }

// house is DESIGN.md's table. Every kbisect package must be in it, so a
// new package is placed on purpose.
var house = map[string]rule{
	"cmd/kbisect": {},
	// How urfave/cli reads a command line, for cmd/kbisect alone.
	"cmd/kbisect/internal/cliargs": {mayImport: only()},
	"run":                          {mayImport: only("bisect", "configs", "culprit", "drive", "history", "lab", "noise", "report", "simulate", "testcmd", "worktree", "kbuild", "remote", "progress")},
	"nightly":                      {mayImport: only("bisect", "configs", "history", "lab", "noise", "report", "run", "worktree", "progress")},
	"report":                       {mayImport: only("bisect", "configs", "lab", "noise", "kbuild", "remote", "simulate")},
	"simulate":                     {mayImport: only("culprit", "drive", "noise"), forbid: []string{"lab", "remote", "kbuild", "bisect", "configs", "worktree"}},
	"culprit":                      {mayImport: []string{}},
	// The loop of calibration, search and confirmation on one machine,
	// shared by run and simulate.
	"drive":             {mayImport: []string{"culprit"}, forbid: []string{"lab", "remote", "kbuild", "bisect", "configs", "worktree", "noise"}},
	"lab":               {mayImport: only("bisect", "configs", "kbuild", "noise", "qemu", "remote", "worktree", "progress")},
	"progress":          {mayImport: only()},
	"testcmd":           {mayImport: only("bisect", "worktree"), forbid: []string{"lab", "remote", "kbuild", "noise"}},
	"bisect":            {mayImport: only(), forbid: []string{"configs", "kbuild", "remote", "noise", "lab", "worktree"}},
	"kbuild":            {mayImport: only("configs", "worktree"), forbid: []string{"remote", "bisect", "noise", "lab"}},
	"remote":            {mayImport: only("configs"), forbid: []string{"noise", "kbuild", "bisect", "lab"}},
	"noise":             {mayImport: only(), forbid: []string{"remote", "configs", "kbuild", "bisect", "lab"}},
	"configs":           {mayImport: only()},
	"worktree":          {mayImport: only()},
	"qemu":              {mayImport: only()},
	"history":           {mayImport: only()},
	"internal/layers":   {mayImport: []string{}},
	"internal/simhost":  {mayImport: only("configs")},
	"internal/simlab":   {mayImport: only("internal/simhost", "internal/testrepo")},
	"internal/sshtest":  {mayImport: []string{}},
	"internal/testrepo": {mayImport: []string{}},
}

func init() {
	// The helpers at the very bottom, verdict among them, import no
	// kbisect package.
	for _, name := range internals {
		house[name] = rule{mayImport: []string{}}
	}
}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// modulePackages is what go list says of the module's packages, tests
// aside.
func modulePackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps=false", "-json", module+"/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: not the module", len(pkgs))
	}
	return pkgs
}

func ours(path string) (string, bool) {
	return strings.CutPrefix(path, module+"/")
}

// violations lists every arrow of pkgs that the house forbids.
func violations(pkgs []pkg, house map[string]rule) []string {
	var bad []string
	for _, p := range pkgs {
		name, _ := ours(p.ImportPath)
		r, ok := house[name]
		if !ok {
			bad = append(bad, name+": not in the house's table (place it in layers_test.go and docs/architecture.md)")
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := ours(imp)
			switch {
			case imp == "github.com/urfave/cli/v2" && name != "cmd/kbisect" && !strings.HasPrefix(name, "cmd/kbisect/"):
				bad = append(bad, name+" imports the CLI library: only cmd/kbisect parses flags")
			case !ok:
			case slices.Contains(testSupport, dep) && name != "cmd/kbisect" && !slices.Contains(testSupport, name):
				bad = append(bad, name+" imports "+dep+": the simulated lab is for tests, demo and simulate")
			case r.mayImport != nil && !slices.Contains(r.mayImport, dep):
				bad = append(bad, name+" imports "+dep)
			case dep == "cmd/kbisect":
				bad = append(bad, name+" imports the CLI")
			}
		}
		for _, d := range p.Deps {
			dep, ok := ours(d)
			if ok && slices.Contains(r.forbid, dep) {
				bad = append(bad, name+" depends on "+dep+", which it must not know about")
			}
		}
	}
	sort.Strings(bad)
	return slices.Compact(bad)
}

func TestNoPackageImportsWhatTheHouseForbids(t *testing.T) {
	for _, v := range violations(modulePackages(t), house) {
		t.Error(v)
	}
}

func TestAForbiddenArrowIsFound(t *testing.T) {
	// The check itself: remote importing noise (what issue 18 removed)
	// and a package outside the table are both reported.
	pkgs := []pkg{
		{ImportPath: "kbisect/remote", Imports: []string{"kbisect/noise", "kbisect/configs"}, Deps: []string{"kbisect/configs", "kbisect/noise"}},
		{ImportPath: "kbisect/newthing"},
		{ImportPath: "kbisect/bisect", Imports: []string{"github.com/urfave/cli/v2"}},
	}
	got := violations(pkgs, house)
	want := []string{
		"bisect imports the CLI library: only cmd/kbisect parses flags",
		"newthing: not in the house's table (place it in layers_test.go and docs/architecture.md)",
		"remote depends on noise, which it must not know about",
		"remote imports noise",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestNoFileIsOverFiveHundredLines keeps files readable in one sitting:
// a file that grows past 500 lines is split by topic (tests aside).
func TestNoFileIsOverFiveHundredLines(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := bytes.Count(b, []byte("\n")); n > 500 {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s has %d lines: split it by topic", rel, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
