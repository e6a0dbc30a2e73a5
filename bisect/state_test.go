package bisect

import (
	"fmt"
	"kbisect/internal/atomicfile"
	"kbisect/verdict"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestStateLogSurvivesATornLastLine(t *testing.T) {
	dir := t.TempDir()
	log, records, err := OpenState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 0 {
		t.Fatalf("new state dir has %d records", len(records))
	}
	start := Record{Event: EventStart, Bad: strings.Repeat("b", 40), Good: []string{strings.Repeat("a", 40)}}
	verdict := Record{Event: EventVerdict, Commit: strings.Repeat("c", 40), Verdict: "bad", Seconds: 1.5}
	for _, r := range []Record{start, verdict} {
		if err := log.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	log.Close()

	// A crash in the middle of the next append leaves half a line.
	path := filepath.Join(dir, LogName)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"v":1,"event":"verdict","commit":"dd`)
	f.Close()

	log, records, err = OpenState(dir)
	if err != nil {
		t.Fatalf("reopen after a torn write: %v", err)
	}
	if len(records) != 2 || records[1].Verdict != "bad" || records[1].Seconds != 1.5 {
		t.Fatalf("records after reopen: %+v", records)
	}
	if err := log.Append(Record{Event: EventVerdict, Commit: strings.Repeat("d", 40), Verdict: "good"}); err != nil {
		t.Fatal(err)
	}
	log.Close()
	_, records, err = OpenState(dir)
	if err != nil || len(records) != 3 || records[2].Verdict != "good" {
		t.Fatalf("the append after the torn line: %v %+v", err, records)
	}
}

func TestStateDirHoldsOneRunAtATime(t *testing.T) {
	dir := t.TempDir()
	log, _, err := OpenState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenState(dir); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open while the first is live: %v", err)
	}
	log.Close()
	log, _, err = OpenState(dir)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	log.Close()
}

func TestStateLogRejectsGarbageWithItsLine(t *testing.T) {
	dir := t.TempDir()
	content := `{"v":1,"event":"start","bad":"` + strings.Repeat("b", 40) + `"}` + "\nnot json\n"
	if err := os.WriteFile(filepath.Join(dir, LogName), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := OpenState(dir)
	if err == nil || !strings.Contains(err.Error(), LogName+":2:") {
		t.Fatalf("err = %v, want one naming %s:2", err, LogName)
	}
	content = `{"v":7,"event":"start"}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, LogName), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenState(dir); err == nil || !strings.Contains(err.Error(), "version 7") {
		t.Fatalf("err = %v, want a version error", err)
	}
}

func TestParseGitLogReadsWhatGitWrites(t *testing.T) {
	b, g1, g2, x, y := strings.Repeat("b", 40), strings.Repeat("1", 40), strings.Repeat("2", 40), strings.Repeat("3", 40), strings.Repeat("4", 40)
	log := "# bad: [" + b + "] subject\n# good: [" + g1 + "] it's\n" +
		"git bisect start '--first-parent' '" + b + "' '" + g1 + "' 'v6.12'\\''s' '--'\n" +
		"# good: [" + x + "] s\ngit bisect good " + x + "\n" +
		"git bisect skip " + y + "\n" +
		"git bisect bad " + g2 + "\n" +
		"# first bad commit: [" + g2 + "] s\n"
	rep, err := ParseGitLog("log", strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Bad != b || !rep.FirstParent || len(rep.Goods) != 2 || rep.Goods[0] != g1 || rep.Goods[1] != "v6.12's" {
		t.Errorf("start: %+v", rep)
	}

	want := []ReplayMark{{5, verdict.Good, x}, {6, verdict.Skip, y}, {7, verdict.Bad, g2}}
	if len(rep.Marks) != len(want) {
		t.Fatalf("marks %+v", rep.Marks)
	}
	for i := range want {
		if rep.Marks[i] != want[i] {
			t.Errorf("mark %d = %+v, want %+v", i, rep.Marks[i], want[i])
		}
	}

	// The older form: an empty start, then the range as verdicts.
	rep, err = ParseGitLog("log", strings.NewReader("git bisect start\ngit bisect bad "+b+"\ngit bisect good "+g1+"\ngit bisect bad "+x+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Bad != b || len(rep.Goods) != 1 || rep.Goods[0] != g1 || len(rep.Marks) != 1 || rep.Marks[0].Rev != x {
		t.Errorf("empty start: %+v", rep)
	}

	for text, want := range map[string]string{
		"git bisect start 'a' 'b' '--' 'kernel/'\n":  "path-limited",
		"git bisect start --term-old=fast 'a' 'b'\n": "terms",
		"git bisect good a\n":                        "before",
		"hello\n":                                    "no \"git bisect start\"",
		"git bisect start 'a'\n":                     "no good",
		"git bisect start\ngit bisect frob a\n":      "log:2: unknown bisect command",
	} {
		if _, err := ParseGitLog("log", strings.NewReader(text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseGitLog(%q) = %v, want an error about %q", text, err, want)
		}
	}
}

// skipPickC is git's skip_away arithmetic (get_prn, sqrti in float, the
// int index expression) compiled by the C compiler, as the oracle for the
// Go port's integer wrap-around and float32 rounding.
const skipPickC = `#include <stdio.h>
static unsigned get_prn(unsigned count) { count = count * 1103515245 + 12345; return (count / 65536) % 32768; }
static int sqrti(int val) {
	float d, x = val;
	if (!val) return 0;
	do { float y = (x + (float)val / x) / 2; d = (y > x) ? y - x : x - y; x = y; } while (d >= 0.5);
	return (int)x;
}
int main(void) {
	for (int count = 1; count <= 70000; count++) {
		int prn = get_prn(count);
		int index = (count * prn / 32768) * sqrti(prn) / sqrti(32768);
		printf("%d %d %d\n", prn, sqrti(prn), index);
	}
	return 0;
}
`

// skipPickGolden holds the C program's output for the counts most
// bisections see and a sample of larger ones, so that the arithmetic is
// checked without a C compiler; TestSkipAwayArithmeticMatchesC checks the
// file itself, and every count, where one is installed.
const skipPickGolden = "testdata/skip_pick_c.txt"

func goldenCount(count int) bool { return count <= 3000 || count%97 == 0 }

func TestSkipAwayArithmeticMatchesGolden(t *testing.T) {
	data, err := os.ReadFile(skipPickGolden)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var count int
		var rest string
		if i := strings.IndexByte(line, ' '); i > 0 {
			count, _ = strconv.Atoi(line[:i])
			rest = line[i+1:]
		}
		p := prn(uint32(count))
		if got := fmt.Sprintf("%d %d %d", p, sqrti(p), skipAwayIndex(count)); got != rest {
			t.Fatalf("count %d: Go %q, C %q", count, got, rest)
		}
		n++
	}
	if n < 3000 {
		t.Fatalf("only %d lines in %s", n, skipPickGolden)
	}
}

func TestSkipAwayArithmeticMatchesC(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc): the golden file test covers the sampled counts")
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "pick.c"), filepath.Join(dir, "pick")
	if err := os.WriteFile(src, []byte(skipPickC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-O2", "-fwrapv", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 70000 {
		t.Fatalf("C printed %d lines", len(lines))
	}
	var golden strings.Builder
	for i, line := range lines {
		count := i + 1
		p := prn(uint32(count))
		if got := fmt.Sprintf("%d %d %d", p, sqrti(p), skipAwayIndex(count)); got != line {
			t.Fatalf("count %d: Go %q, C %q", count, got, line)
		}
		if goldenCount(count) {
			fmt.Fprintf(&golden, "%d %s\n", count, line)
		}
	}
	if os.Getenv("KBISECT_WRITE_GOLDEN") != "" {
		if err := os.WriteFile(skipPickGolden, []byte(golden.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if data, err := os.ReadFile(skipPickGolden); err != nil || string(data) != golden.String() {
		t.Errorf("%s is not what the C program prints (regenerate with KBISECT_WRITE_GOLDEN=1): %v", skipPickGolden, err)
	}
}

// A temporary file a killed run left in its state directory (a commit's
// evidence half written) is gone when the state is opened again; the
// state's own files stay.
func TestOpeningTheStateSweepsWhatAKilledRunLeft(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "commits"), 0o755); err != nil {
		t.Fatal(err)
	}
	// What a run killed between writing and renaming leaves.
	for _, name := range []string{"commits/.0123abcd.json.kbisect-tmp1234", ".calibration.json.kbisect-tmp99", "commits/0123abcd.json"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "calibration.json"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	log, _, err := OpenState(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	var left []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			left = append(left, rel)
		}
		return nil
	})
	if strings.Join(left, " ") != "calibration.json commits/0123abcd.json lock" {
		t.Errorf("the state holds %q", left)
	}
}
