package configs

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// testEnv is the environment the table tests see: BMC_PASSWORD and
// CCACHE_REDIS_PASSWORD are set,
// LAB_TOKEN is not.
func testEnv(name string) (string, bool) {
	if name == "BMC_PASSWORD" || name == "CCACHE_REDIS_PASSWORD" {
		return "hunter2", true
	}
	return "", false
}

func testOptions() LoadOptions {
	return LoadOptions{Home: "/nonexistent-home", LookupEnv: testEnv}
}

var posPrefix = regexp.MustCompile(`^\d+(:\d+)?: `)

// update rewrites the "# want:" and "# warn:" lines of the testdata files
// with what Load reports now; review the diff before committing it.
var update = flag.Bool("update", false, "rewrite the expectations in testdata/*.yaml")

// writeExpectations replaces file's expectation lines with diags.
func writeExpectations(t *testing.T, file string, diags []Diagnostic) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("testdata")
	var out []string
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if !strings.HasPrefix(line, "# want: ") && !strings.HasPrefix(line, "# warn: ") {
			out = append(out, line)
		}
	}
	for _, d := range diags {
		kind := "want"
		if d.Warning {
			kind = "warn"
		}
		d.Warning = false
		text := strings.ReplaceAll(d.String(), abs, "$TESTDATA")
		if rest, ok := strings.CutPrefix(text, file+":"); ok {
			text = strings.TrimPrefix(rest, " ")
		}
		out = append(out, "# "+kind+": "+text)
	}
	if err := os.WriteFile(file, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// expectations reads the "# want: " (errors) and "# warn: " (warnings)
// comment lines of a testdata file: "line:col: key: message" about the
// file itself, "testdata/other.yaml:line:col: …" about another, and a bare
// message about the whole file. $TESTDATA is the testdata directory.
func expectations(t *testing.T, file string) (want, warn []string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	abs, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		for _, kind := range []string{"# want: ", "# warn: "} {
			text, ok := strings.CutPrefix(line, kind)
			if !ok {
				continue
			}
			text = strings.ReplaceAll(text, "$TESTDATA", abs)
			switch {
			case posPrefix.MatchString(text):
				text = file + ":" + text
			case strings.HasPrefix(text, "testdata/"):
			default:
				text = file + ": " + text
			}
			if kind == "# want: " {
				want = append(want, text)
			} else {
				warn = append(warn, strings.Replace(text, ": ", ": warning: ", 1))
			}
		}
	}
	return want, warn
}

func strs(ds []Diagnostic) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.String()
	}
	return out
}

func diffLists(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") == strings.Join(want, "\n") {
		return
	}
	t.Errorf("%s:\n got:\n\t%s\n want:\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
}

// TestJobFileTables loads every testdata/valid-*.yaml and invalid-*.yaml
// and compares every error and warning, text and position, with the
// file's own "# want:" and "# warn:" lines (go test -run TestJobFileTables
// -update rewrites them; read the diff).
func TestJobFileTables(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("testdata: %d files, %v", len(files), err)
	}
	for _, file := range files {
		valid := strings.HasPrefix(filepath.Base(file), "valid-")
		if !valid && !strings.HasPrefix(filepath.Base(file), "invalid-") {
			continue
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			job, err := Load(file, testOptions())
			var ce *Errors
			if *update {
				all := []Diagnostic{}
				if errors.As(err, &ce) {
					all = ce.All
				} else if job != nil {
					all = job.Warnings
				}
				writeExpectations(t, file, all)
			}
			want, warn := expectations(t, file)
			switch {
			case valid && err != nil:
				t.Fatalf("want a valid job, got:\n%v", err)
			case !valid && !errors.As(err, &ce):
				t.Fatalf("want *Errors, got %v", err)
			case !valid && len(want) == 0:
				t.Fatalf("an invalid-*.yaml file must say what it wants")
			case valid && len(want) > 0:
				t.Fatalf("a valid-*.yaml file wants no errors")
			}
			if valid {
				diffLists(t, "warnings", strs(job.Warnings), warn)
				return
			}
			diffLists(t, "errors", strs(ce.List), want)
			diffLists(t, "warnings", strs(ce.Warnings), warn)
		})
	}
}

// TestExampleJobFilesLoad loads the job files that ship in configs/ and
// checks what they say about their machines.
func TestExampleJobFilesLoad(t *testing.T) {
	opt := testOptions()
	sys, err := Load("system-0.yaml", opt)
	if err != nil {
		t.Fatalf("system-0.yaml: %v", err)
	}
	if got := sys.Workload.CPUs.String(); got != "1-16,33-48" || !sys.Defaulted("workload.cpus") {
		t.Errorf("system-0 measures %s (defaulted %v), want the isolated 1-16,33-48", got, sys.Defaulted("workload.cpus"))
	}
	if sys.Boot.Method != BootKexec || sys.Boot.Timeout.D() != 15*time.Minute {
		t.Errorf("system-0 boot %s/%s, want kexec/15m from lab-defaults.yaml", sys.Boot.Method, sys.Boot.Timeout)
	}
	if p, ok := sys.Pos("boot.method"); !ok || p.File != "lab-defaults.yaml" {
		t.Errorf("boot.method set at %v, want lab-defaults.yaml", p)
	}
	if sys.Verdict.Threshold.String() != "1ms" || sys.Verdict.Metric != "noise" || sys.Workload.NoiseThreshold.D() != time.Microsecond {
		t.Errorf("system-0 verdict %+v", sys.Verdict)
	}
	abs, _ := filepath.Abs("fragments/preempt-rt.config")
	if len(sys.Build.Fragments) != 1 || string(sys.Build.Fragments[0]) != abs {
		t.Errorf("fragments %v, want [%s]", sys.Build.Fragments, abs)
	}
	if err := sys.CheckEnv(testEnv); err != nil {
		t.Errorf("CheckEnv with BMC_PASSWORD set: %v", err)
	}
	if err := sys.CheckEnv(func(string) (string, bool) { return "", false }); err == nil ||
		err.Error() != "system-0.yaml: boot.console: environment variable BMC_PASSWORD is not set; boot.power_cycle: environment variable BMC_PASSWORD is not set" {
		t.Errorf("CheckEnv without BMC_PASSWORD: %v", err)
	}

	q, err := Load("qemu-local.yaml", opt)
	if err != nil {
		t.Fatalf("qemu-local.yaml: %v", err)
	}
	if q.Machine.CPUs != 2 || q.Workload.CPUs.String() != "1" || q.Host.Address != "" || q.Build.Config != "tinyconfig" {
		t.Errorf("qemu-local: cpus %d, measures %s, address %q, config %s", q.Machine.CPUs, q.Workload.CPUs, q.Host.Address, q.Build.Config)
	}
	for _, w := range append(sys.Warnings, q.Warnings...) {
		if !strings.Contains(w.Msg, "fine if") {
			t.Errorf("unexpected warning: %s", w)
		}
	}
	defaults, err := Load("lab-defaults.yaml", LoadOptions{AllowDefaults: true})
	if err != nil || defaults.Kind != KindDefaults {
		t.Errorf("lab-defaults.yaml on its own: %v", err)
	}
}

// TestEveryKeyDecodes sets every schema key in some valid-*.yaml file, so
// each has a decoder and a test.
func TestEveryKeyDecodes(t *testing.T) {
	set := map[string]bool{}
	files, _ := filepath.Glob("testdata/valid-*.yaml")
	for _, f := range files {
		job, err := Load(f, testOptions())
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for k := range job.pos {
			set[k] = true
		}
		set["apiVersion"], set["kind"] = true, true
		if len(job.Include) > 0 {
			set["include"] = true
		}
	}
	for _, k := range Keys() {
		if !set[k] {
			t.Errorf("no valid-*.yaml sets %s", k)
		}
	}
}

// TestEffectiveJobLoadsAsTheSame renders each valid job with config show's
// Effective and loads the result: the same job, no secret expanded.
func TestEffectiveJobLoadsAsTheSame(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid-*.yaml")
	files = append(files, "system-0.yaml", "qemu-local.yaml")
	for _, f := range files {
		job, err := Load(f, testOptions())
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out, err := job.Effective()
		if err != nil {
			t.Fatalf("%s: Effective: %v", f, err)
		}
		if strings.Contains(string(out), "hunter2") {
			t.Fatalf("%s: a secret's value was printed:\n%s", f, out)
		}
		again := filepath.Join(t.TempDir(), "effective.yaml")
		if err := os.WriteFile(again, out, 0o644); err != nil {
			t.Fatal(err)
		}
		job2, err := Load(again, testOptions())
		if err != nil {
			t.Fatalf("%s: the effective job does not load:\n%v\n%s", f, err, out)
		}
		for _, j := range []*Job{job, job2} {
			j.File, j.Warnings, j.pos, j.defaulted, j.Include = "", nil, nil, nil, nil
		}
		if !reflect.DeepEqual(job, job2) {
			t.Errorf("%s: the effective job loads differently:\n%+v\n%+v", f, job, job2)
		}
	}
}

func TestEffectiveSaysWhereValuesCameFrom(t *testing.T) {
	job, err := Load("testdata/valid-include.yaml", testOptions())
	if err != nil {
		t.Fatal(err)
	}
	out, err := job.Effective()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# testdata/valid-include.yaml as kbisect uses it: defaults filled in, include/lab.yaml, include/site.yaml merged.\n",
		"  timeout: 30m\n",                   // the machine's file wins
		"  settle: 1m30s # from site.yaml\n", // the later include wins
		"  connect_timeout: 45s # from lab.yaml\n",
		"  port: 22 # default\n",
		"    min: 4 # from lab.yaml\n", // sections merge key by key
		"    max: 30\n",
		"  formats: # from site.yaml\n    - text\n    - junit\n", // lists replace lists
		"  cpus: 1-7 # default\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("effective job lacks %q:\n%s", want, out)
		}
	}
	// config show shows the build's deadline, defaulted, in its section.
	_, build, _ := strings.Cut(string(out), "\nbuild:")
	build, _, _ = strings.Cut(build, "\nworkload:")
	if !strings.Contains(build, "\n  timeout: 3h # default\n") {
		t.Errorf("the build section lacks build.timeout:\n%s", build)
	}
}

func TestSyntaxErrorsPointAtTheRightLine(t *testing.T) {
	for src, want := range map[string]string{
		"apiVersion: kbisect/v1\nkind: Job\nmachine: {name: box\nhost:\n  address: x\n": "x.yaml:3: YAML syntax: did not find expected ',' or '}'",
		"apiVersion: kbisect/v1\nkind: Job\nboot:\n  - 1\n params: x\n":                 "x.yaml:5:2: YAML syntax: this line is indented to column 2, between the columns of the keys around it (1 and 3): indent it as its siblings are (YAML says: did not find expected key)",
		"apiVersion: kbisect/v1\nkind: Job\nmachine: @x\n":                              "x.yaml:3: YAML syntax: found character that cannot start any token",
		"machine: [\n": "x.yaml:2: YAML syntax: did not find expected node content",
		"- a\n- b\n":   "x.yaml:1:1: expected a mapping of keys (apiVersion, kind, machine, host, boot, …); this is not a job file",
		// An indentation mistake, where it is, with its column (YAML puts
		// the first at line 3, where the mapping began).
		"apiVersion: kbisect/v1\nkind: Job\nmachine:\n  name: box\n  arch: x86_64\n cpus: 64\n  sockets: 2\n": "x.yaml:6:2: YAML syntax: this line is indented to column 2, between the columns of the keys around it (1 and 3): indent it as its siblings are (YAML says: did not find expected key)",
		"apiVersion: kbisect/v1\nkind: Job\nmachine:\n  name: box\n   arch: x86_64\n":                         "x.yaml:5:4: YAML syntax: this line is indented to column 4, under a line that holds a value: nothing can be nested there (its siblings are at column 3) (YAML says: mapping values are not allowed in this context)",
		"apiVersion: kbisect/v1\nkind: Job\nboot:\n  params: >-\n      nohz_full=1\n    isolcpus=1\n":         "x.yaml:6:5: YAML syntax: this line is indented to column 5, less than the first line of the text it continues (column 7) (YAML says: did not find expected key)",
	} {
		_, err := Load("x.yaml", LoadOptions{ReadFile: func(string) ([]byte, error) { return []byte(src), nil }})
		if err == nil || err.Error() != want {
			t.Errorf("%q:\n got %v\nwant %s", src, err, want)
		}
	}
}

// TestAliasBombIsNotExpanded: aliases are followed, never copied, so a
// "billion laughs" file costs what its text costs.
func TestAliasBombIsNotExpanded(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: kbisect/v1\nkind: Job\nx-bomb:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "  a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	b.WriteString("machine: {name: box}\nreport:\n  formats: *a8\n")
	_, err := Load("bomb.yaml", LoadOptions{ReadFile: func(string) ([]byte, error) { return []byte(b.String()), nil }})
	var ce *Errors
	if !errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
	// 10^9 strings if expanded; ten lists that are not format names here.
	n := 0
	for _, d := range ce.List {
		if strings.HasPrefix(d.Key, "report.formats[") {
			n++
			if d.Msg != "expected text, got a list" {
				t.Errorf("%s", d)
			}
		}
	}
	if n != 10 {
		t.Errorf("%d errors about report.formats, want 10:\n%v", n, err)
	}
}

// FuzzLoad feeds the loader arbitrary job files: it must never panic, and
// every problem it reports must say where.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	files = append(files, "system-0.yaml", "qemu-local.yaml", "lab-defaults.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		opt := LoadOptions{Home: "/home/fuzz", LookupEnv: testEnv, ReadFile: func(name string) ([]byte, error) {
			if name == "fuzz.yaml" {
				return data, nil
			}
			return nil, os.ErrNotExist
		}}
		job, err := Load("fuzz.yaml", opt)
		var ce *Errors
		switch {
		case err == nil:
			if job == nil || job.Kind != KindJob || job.Machine.Name == "" {
				t.Fatalf("a valid job without kind or name: %+v", job)
			}
			if _, err := job.Effective(); err != nil {
				t.Fatalf("Effective: %v", err)
			}
		case errors.As(err, &ce):
			if len(ce.List) == 0 {
				t.Fatal("*Errors without errors")
			}
			for _, d := range ce.All {
				if d.Pos.File == "" || d.Msg == "" {
					t.Fatalf("a diagnostic that does not say where or what: %+v", d)
				}
			}
		default:
			t.Fatalf("Load returned %T %v", err, err)
		}
	})
}

func TestErrorsInsideValuesPointAtTheEntryWhenTheTextShowsIt(t *testing.T) {
	head := "apiVersion: kbisect/v1\nkind: Job\nmachine: {name: box, cpus: 4}\nhost: {address: h}\nbuild: {tree: /}\nboot:\n  method: kexec\n"
	for params, want := range map[string]string{
		"  params: nohz_full=1-9\n":                    "x.yaml:8:21: boot.params: nohz_full: CPU 9 is outside the machine (machine.cpus: 4, CPUs 0-3)",
		"  params: 'quiet nohz_full=1-9'\n":            "x.yaml:8:28: boot.params: nohz_full: CPU 9 is outside the machine (machine.cpus: 4, CPUs 0-3)",
		"  params: \"quiet\\tnohz_full=1-9\"\n":        "x.yaml:8:11: boot.params: nohz_full: CPU 9 is outside the machine (machine.cpus: 4, CPUs 0-3)",
		"  params: >-\n    quiet\n    nohz_full=1-9\n": "x.yaml:10:15: boot.params: nohz_full: CPU 9 is outside the machine (machine.cpus: 4, CPUs 0-3)",
	} {
		src := head + params
		_, err := Load("x.yaml", LoadOptions{Home: "/h", ReadFile: func(string) ([]byte, error) { return []byte(src), nil }})
		if err == nil || err.Error() != want {
			t.Errorf("%q:\n got %v\nwant %s", params, err, want)
		}
	}
}
