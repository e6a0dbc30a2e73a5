package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// soakJournals checks a run's state directory after each kbisect: the
// journals grow only by appending (nothing a run wrote is lost when the
// next one resumes), and nothing in them is recorded twice.
type soakJournals struct {
	prev  map[string][]byte // each journal as the last check read it, to its last newline
	skips int               // skip records in the search journal
}

// The append-only journals.
var soakAppendOnly = []string{"search.jsonl", "session.jsonl"}

var bisectLogVerdict = regexp.MustCompile(`(?m)^git bisect (good|bad|skip) (.+)$`)

func (j *soakJournals) check(state string) []string {
	if j.prev == nil {
		j.prev = map[string][]byte{}
	}
	var problems []string
	for _, name := range soakAppendOnly {
		b, err := os.ReadFile(filepath.Join(state, name))
		if errors.Is(err, os.ErrNotExist) && len(j.prev[name]) == 0 {
			continue
		}
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		b = b[:bytes.LastIndexByte(b, '\n')+1]
		if !bytes.HasPrefix(b, j.prev[name]) {
			problems = append(problems, fmt.Sprintf("LOST: %s no longer holds what the run before wrote (%d bytes then, %d now)", name, len(j.prev[name]), len(b)))
		}
		j.prev[name] = b
	}
	problems = append(problems, j.searchDuplicates()...)
	problems = append(problems, duplicateVerdicts(j.prev["session.jsonl"])...)
	if b, err := os.ReadFile(filepath.Join(state, "git-bisect.log")); err == nil {
		seen := map[string]bool{}
		for _, m := range bisectLogVerdict.FindAllStringSubmatch(string(b), -1) {
			for _, c := range strings.Fields(m[2]) {
				if seen[c] {
					problems = append(problems, fmt.Sprintf("DUPLICATED: git-bisect.log says %s twice", c))
				}
				seen[c] = true
			}
		}
	}
	return problems
}

// searchDuplicates finds a boot journaled twice: the same boot ID, or the
// same kernel's boot by the same name.
func (j *soakJournals) searchDuplicates() []string {
	var problems []string
	ids, subs, skips := map[string]bool{}, map[string]bool{}, map[string]bool{}
	j.skips = 0
	for _, line := range bytes.Split(bytes.TrimSpace(j.prev["search.jsonl"]), []byte("\n")) {
		var r struct {
			Kind, Commit, Built, Sub string
			BootID                   string `json:"boot_id"`
			Reverted                 bool
		}
		if len(line) == 0 {
			continue
		}
		if err := json.Unmarshal(line, &r); err != nil {
			problems = append(problems, fmt.Sprintf("search.jsonl: %v", err))
			continue
		}
		if r.Kind == "skip" {
			j.skips++
			key := fmt.Sprintf("%s %v", r.Commit, r.Reverted)
			if skips[key] {
				problems = append(problems, "DUPLICATED: search.jsonl skips "+key+" twice")
			}
			skips[key] = true
			continue
		}
		kernel := r.Commit
		if r.Built != "" {
			kernel = r.Built
		}
		if key := kernel + "/" + r.Sub; r.Sub != "" && subs[key] {
			problems = append(problems, "DUPLICATED: search.jsonl journals boot "+key+" twice")
		} else {
			subs[key] = true
		}
		if r.BootID != "" && ids[r.BootID] {
			problems = append(problems, "DUPLICATED: search.jsonl journals boot ID "+r.BootID+" twice")
		}
		ids[r.BootID] = true
	}
	return problems
}

// duplicateVerdicts finds a commit with two verdicts in the session log.
func duplicateVerdicts(log []byte) []string {
	var problems []string
	seen := map[string]bool{}
	for _, line := range bytes.Split(bytes.TrimSpace(log), []byte("\n")) {
		var r struct{ Event, Commit, Verdict string }
		if len(line) == 0 || json.Unmarshal(line, &r) != nil || r.Event != "verdict" {
			continue
		}
		if seen[r.Commit] {
			problems = append(problems, fmt.Sprintf("DUPLICATED: session.jsonl has a second verdict (%s) for %s", r.Verdict, r.Commit))
		}
		seen[r.Commit] = true
	}
	return problems
}

// canMountTmpfs says whether this process may mount a tmpfs (root).
func canMountTmpfs(root string) bool {
	dir := filepath.Join(root, "mount-probe")
	if err := mountTmpfs(dir, "1m"); err != nil {
		return false
	}
	return exec.Command("umount", dir).Run() == nil
}

// mountTmpfs mounts a tmpfs of size on dir (made if missing): a file
// system that fills for real, whose statfs says so.
func mountTmpfs(dir, size string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %v: %s", dir, err, out)
	}
	return nil
}

// fillDisk fills dir's file system with .soak-filler until the writes
// fail for want of room.
func fillDisk(dir string) {
	f, err := os.Create(filepath.Join(dir, ".soak-filler"))
	if err != nil {
		return // full already
	}
	defer f.Close()
	chunk := make([]byte, 1<<16)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				fmt.Fprintf(os.Stderr, "soak: filling %s: %v\n", dir, err)
			}
			return
		}
	}
}

// writeSoakTable renders the results so far, per fault, and writes them to
// KBISECT_SOAK_OUT when it is set.
func writeSoakTable(t *testing.T, command string, results []*soakResult, took time.Duration) string {
	type row struct {
		runs, right, inconclusive, wrong, unfinished, named, skips, kills, resumes, lost, dup, dirty, labSkips, other int
	}
	rows := map[string]*row{}
	total := &row{}
	phases := map[string]int{}
	var problems []string
	done := 0
	for _, r := range results {
		if r == nil {
			continue
		}
		done++
		for _, w := range []*row{rows[r.inv.Fault], total} {
			if w == nil {
				w = &row{}
				rows[r.inv.Fault] = w
			}
			w.runs++
			switch r.outcome {
			case soakRight:
				w.right++
			case soakInconclusive:
				w.inconclusive++
			case soakWrong:
				w.wrong++
			default:
				w.unfinished++
			}
			w.named += r.named
			w.skips += r.skips
			w.kills += r.kills
			w.resumes += r.resumes
			for _, p := range r.problems {
				switch {
				case strings.HasPrefix(p, "LOST"):
					w.lost++
				case strings.HasPrefix(p, "DUPLICATED"):
					w.dup++
				case strings.Contains(p, "tree"):
					w.dirty++
				case strings.HasPrefix(p, "SKIP FROM THE LAB"):
					w.labSkips++
				default:
					w.other++
				}
			}
		}
		if r.kills > 0 {
			phases[r.killPhase]++
		}
		if r.outcome == soakWrong || len(r.problems) > 0 {
			problems = append(problems, fmt.Sprintf("- %s, seed %d, %d commits (%s): %s; %s", r.inv.Fault, r.inv.Seed, r.inv.Commits,
				filepath.Base(r.inv.Dir), r.outcome, strings.Join(r.problems, "; ")))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "`%s`\n\n%d of %d runs, %.0f min\n\n", command, done, len(results), took.Minutes())
	b.WriteString("| fault | runs | right | inconclusive | stops naming the fault | wrong found | no answer | skips journaled | skips the lab caused | SIGKILLs | resumes | lost / duplicated verdicts | tree changed | other problems |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	line := func(name string, w *row) {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d / %d | %d | %d |\n", name, w.runs, w.right, w.inconclusive,
			w.named, w.wrong, w.unfinished, w.skips, w.labSkips, w.kills, w.resumes, w.lost, w.dup, w.dirty, w.other)
	}
	for _, f := range soakFaults {
		if w := rows[f]; w != nil {
			line(f, w)
		}
	}
	line("**all**", total)
	var ph []string
	for p, n := range phases {
		ph = append(ph, fmt.Sprintf("%s %d", p, n))
	}
	sort.Strings(ph)
	fmt.Fprintf(&b, "\nSIGKILLed while: %s\n", strings.Join(ph, ", "))
	if len(problems) > 0 {
		fmt.Fprintf(&b, "\nProblems:\n%s\n", strings.Join(problems, "\n"))
	}
	if out := os.Getenv("KBISECT_SOAK_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
	return b.String()
}

// TestSoakJournalCheckFindsLostAndDuplicatedVerdicts: the soak's own
// check sees a journal that lost what a run wrote, a boot journaled
// twice and a second verdict for a commit, and passes a journal that
// only grew (a torn last line aside).
func TestSoakJournalCheckFindsLostAndDuplicatedVerdicts(t *testing.T) {
	state := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(state, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	boot1 := `{"kind":"boot","commit":"a","sub":"boot-1","boot_id":"id-1"}` + "\n"
	boot2 := `{"kind":"boot","commit":"b","sub":"boot-1","boot_id":"id-2"}` + "\n"
	verdict := `{"v":1,"event":"verdict","commit":"a","verdict":"good"}` + "\n"
	var j soakJournals
	write("search.jsonl", boot1)
	write("session.jsonl", verdict)
	if p := j.check(state); len(p) != 0 {
		t.Fatalf("a first journal: %q", p)
	}
	write("search.jsonl", boot1+boot2+`{"kind":"bo`)
	if p := j.check(state); len(p) != 0 {
		t.Fatalf("a journal that grew, its last line torn: %q", p)
	}
	write("search.jsonl", boot2)
	if p := j.check(state); len(p) != 1 || !strings.HasPrefix(p[0], "LOST: search.jsonl") {
		t.Fatalf("a journal that lost a boot: %q", p)
	}
	j = soakJournals{}
	write("search.jsonl", boot1+strings.Replace(boot1, "id-1", "id-9", 1))
	write("session.jsonl", verdict+verdict)
	p := j.check(state)
	if len(p) != 2 || p[0] != "DUPLICATED: search.jsonl journals boot a/boot-1 twice" ||
		p[1] != "DUPLICATED: session.jsonl has a second verdict (good) for a" {
		t.Fatalf("duplicates: %q", p)
	}
}
