package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"kbisect/cmd/kbisect/internal/cliargs"
)

// Flags go anywhere, as users write them: after a file too, and a flag's
// value is never taken for an argument.
func TestFlagsGoAnywhere(t *testing.T) {
	oslat := "../../noise/testdata/lab612rt-smp2-oslat.txt"
	for _, args := range [][]string{
		{"parse", "--tool", "oslat", oslat, "--json"},
		{"parse", oslat, "--tool", "oslat", "--json"},
		{"parse", oslat, "--json", "--tool=oslat"},
	} {
		code, stdout, stderr := runCLI(t, context.Background(), args...)
		var out struct {
			Tool string `json:"tool"`
			CPUs []any  `json:"cpus"`
		}
		if code != exitOK || json.Unmarshal([]byte(stdout), &out) != nil || len(out.CPUs) == 0 {
			t.Errorf("%v: exit %d, stdout %.200q, stderr %q", args, code, stdout, stderr)
		}
	}
	code, stdout, stderr := runCLI(t, context.Background(), "validate", "../../configs/system-0.yaml", "--json")
	if code != exitOK || !strings.Contains(stdout, `"files"`) || strings.Contains(stderr, "--json") {
		t.Errorf("validate FILE --json: exit %d, stdout %.200q, stderr %q", code, stdout, stderr)
	}
	// After --, everything is an argument.
	if got := cliargs.FlagsFirst(newApp(nil, nil), []string{"kbisect", "validate", "a.yaml", "--json", "--", "--b.yaml"}); strings.Join(got, " ") != "kbisect validate --json a.yaml -- --b.yaml" {
		t.Errorf("reordered: %q", got)
	}
}

// A mistake in the command line is exit 2 and one line that says what and
// where the help is: no help page, no JSON of a run that never began.
func TestUsageMistakesAreOneLineAndExit2(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"report"}, "kbisect: report: --state is required (see kbisect report --help)\n"},
		{[]string{"ab", "--a", "v1", "--b", "v2"}, "kbisect: ab: --job is required (see kbisect ab --help)\n"},
		{[]string{"host", "check"}, "kbisect: host check: --job is required (see kbisect host check --help)\n"},
		{[]string{"parse", "x.txt", "--json"}, "kbisect: parse: --tool is required (see kbisect parse --help)\n"},
		{[]string{"demo", "extra"}, "kbisect: demo: unexpected argument \"extra\": it takes only flags (see kbisect demo --help)\n"},
		{[]string{"report", "--state"}, "kbisect: report: flag needs an argument: -state (see kbisect report --help)\n"},
		{[]string{"run"}, "kbisect: run: give --job FILE (bisect kernels on a lab machine) or --exec CMD (a test command, as for git bisect run), with --good REV and --bad REV (see kbisect run --help)\n"},
	} {
		code, stdout, stderr := runCLI(t, context.Background(), c.args...)
		if code != exitUsage || stderr != c.want {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
		if strings.Contains(stdout, "USAGE") || (stdout != "" && !strings.Contains(strings.Join(c.args, " "), "--json")) {
			t.Errorf("%v: stdout %q", c.args, stdout)
		}
	}

	// --json's object on such a mistake is the command's: a bisection's
	// keeps its lists, parse's is just what ended it.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"parse", "x.txt", "--json"}, `{"error":"parse: --tool is required (see kbisect parse --help)","result":"aborted"}` + "\n"},
		{[]string{"run", "--json"}, `{"candidates":[],"error":"run: give --job FILE (bisect kernels on a lab machine) or --exec CMD (a test command, as for git bisect run), with --good REV and --bad REV (see kbisect run --help)","result":"aborted","tested":[]}` + "\n"},
	} {
		if code, stdout, _ := runCLI(t, context.Background(), c.args...); code != exitUsage || stdout != c.want {
			t.Errorf("%v: exit %d, stdout %q, want %q", c.args, code, stdout, c.want)
		}
	}
}

// A flag's help names its default once, and not for a switch that is off.
func TestAFlagsHelpNamesItsDefaultOnce(t *testing.T) {
	_, stdout, _ := runCLI(t, context.Background(), "run", "--help")
	for _, line := range strings.Split(stdout, "\n") {
		if strings.Count(line, "(default") > 1 || strings.Contains(line, "(default: false)") || strings.Contains(line, "(default: 0)") {
			t.Errorf("%q", line)
		}
	}
	for _, want := range []string{"(default: <git-dir>/kbisect/run-<id>)\n", "bisect from there (default: on a terminal, or find_good.enabled)\n", `(default: ".")`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("run --help lacks %q", want)
		}
	}
}

// A full disk says what to do, whatever file it stopped at.
func TestAFullDiskSaysWhatToDo(t *testing.T) {
	var stderr strings.Builder
	err := fmt.Errorf("lab: %w", &os.PathError{Op: "write", Path: "/state/.session.jsonl.kbisect-tmp1", Err: syscall.ENOSPC})
	if code := exitCode(context.Background(), err, &stderr); code != exitFailure ||
		!strings.Contains(stderr.String(), "kbisect: a disk is full (above, the file it could not write): free space there and run the same command again") {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
}
