package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"kbisect/internal/simlab"
	"kbisect/nightly"
	"kbisect/noise"
	"kbisect/report"
)

// exampleFormats are the files of docs/examples: a run's and an A/B
// comparison's report in every format.
var exampleFormats = report.FileExt

// TestDocsExamplesAreCurrent checks docs/examples; with
// KBISECT_DOCS_UPDATE=1 it makes them again from a run and an A/B
// comparison on the simulated lab (paths shown as under /home/rt/lab).
func TestDocsExamplesAreCurrent(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "examples")
	if os.Getenv("KBISECT_DOCS_UPDATE") != "" {
		writeExamples(t, dir)
	}
	for _, kind := range []string{"run", "ab"} {
		for format, ext := range exampleFormats {
			b, err := os.ReadFile(filepath.Join(dir, kind+"."+ext))
			if err != nil || len(b) == 0 {
				t.Errorf("docs/examples/%s.%s (%s): %v (KBISECT_DOCS_UPDATE=1 go test ./cmd/kbisect -run TestDocsExamples makes it)", kind, ext, format, err)
			}
		}
	}
	var run report.RunJSON
	if b, err := os.ReadFile(filepath.Join(dir, "run.json")); err == nil {
		if err := json.Unmarshal(b, &run); err != nil || run.Result != "found" || run.Posterior == nil || run.Posterior.Probability < 0.99 {
			t.Errorf("docs/examples/run.json: %v, %+v", err, run)
		}
	}
}

func writeExamples(t *testing.T, dir string) {
	l := simLab(t, simlab.Options{Seed: 1})
	ctx := context.Background()
	base := filepath.Dir(l.JobFile)
	run, ab := filepath.Join(base, "state-run"), filepath.Join(base, "state-ab")
	if code, _, stderr := runCLI(t, ctx, "run", "--job", l.JobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", run); code != exitOK {
		t.Fatal(stderr)
	}
	if code, _, stderr := runCLI(t, ctx, "ab", "--job", l.JobFile, "--base", l.Tree.Bad, "--revert", l.Tree.Regression[:12], "--state", ab); code != exitOK {
		t.Fatal(stderr)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for kind, state := range map[string]string{"run": run, "ab": ab} {
		for format, ext := range exampleFormats {
			code, out, stderr := runCLI(t, ctx, "report", "--state", state, "--format", format)
			if code != exitOK {
				t.Fatal(stderr)
			}
			out = strings.ReplaceAll(out, base, "/home/rt/lab")
			if err := os.WriteFile(filepath.Join(dir, kind+"."+ext), []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestEveryJSONFieldIsDocumented: each field of kbisect's JSON (run
// --json, ab --json, report --format json) is named in docs/report.md,
// and of nightly --json and history --format json in docs/ci.md.
func TestEveryJSONFieldIsDocumented(t *testing.T) {
	checkJSONDocumented(t, "report.md", report.RunJSON{}, report.ABResultJSON{}, noise.ABReport{})
	checkJSONDocumented(t, "ci.md", nightly.Result{}, report.History{})
}

func checkJSONDocumented(t *testing.T, file string, values ...any) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", file))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, where string) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] {
			return
		}
		seen[ty] = true
		for i := 0; i < ty.NumField(); i++ {
			f := ty.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if !strings.Contains(string(doc), "`"+name+"`") {
				t.Errorf("docs/%s does not name the JSON field `%s` (%s.%s)", file, name, where, f.Name)
			}
			walk(f.Type, ty.Name())
		}
	}
	for _, v := range values {
		walk(reflect.TypeOf(v), reflect.TypeOf(v).Name())
	}
}
