package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSoak is the fault-matrix soak (just soak): seeded simulated
// bisections, each with one of the lab's faults, each kbisect run a child
// process SIGKILLed once at a random line of its progress and resumed with
// the same command; a run stopped by a fault of the lab is resumed once
// the lab is fixed, as its user would. It counts how the runs end (the
// planted regression found, an honest inconclusive or not reproduced, a
// wrong culprit found), the stops that named their fault, and checks
// that no verdict was lost or recorded twice and that the user's tree is
// as it was. KBISECT_SOAK_SEED, _RUNS (200), _PARALLEL (1), _OUT (a
// file for the table), _DIR (where the labs and their logs stay) and
// _FAULTS (some of the faults, by name, comma-separated) tune it.
func TestSoak(t *testing.T) {
	if os.Getenv("KBISECT_SOAK") != "1" {
		t.Skip("the fault-matrix soak runs with KBISECT_SOAK=1 (just soak)")
	}
	seed, runs, parallel := soakEnv(t, "KBISECT_SOAK_SEED", 1), soakEnv(t, "KBISECT_SOAK_RUNS", 200), soakEnv(t, "KBISECT_SOAK_PARALLEL", 1)
	root := os.Getenv("KBISECT_SOAK_DIR") // kept, with each run's log
	if root == "" {
		root = t.TempDir()
	}
	disks := canMountTmpfs(root)
	if !disks {
		t.Log("no tmpfs can be mounted here (not root?): the disk faults are left out")
	}
	var only []string
	if v := os.Getenv("KBISECT_SOAK_FAULTS"); v != "" {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); !slices.Contains(soakFaults, f) || !disks && (f == soakBuildDisk || f == soakStateDisk) {
				t.Fatalf("KBISECT_SOAK_FAULTS: %q is none of the faults this machine can inject: %s", f, strings.Join(soakFaults, ", "))
			}
			only = append(only, f)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 20))
	plans := make([]soakPlan, 0, runs)
	for i := 0; len(plans) < runs; i++ {
		inv := newSoakScenario(rng, i, root)
		p := soakPlan{inv: inv, killLine: 1 + rng.IntN(160), fillLine: 1 + rng.IntN(120)}
		if !disks && (inv.Fault == soakBuildDisk || inv.Fault == soakStateDisk) || len(only) > 0 && !slices.Contains(only, inv.Fault) {
			continue
		}
		plans = append(plans, p)
	}
	command := fmt.Sprintf("KBISECT_SOAK=1 KBISECT_SOAK_SEED=%d KBISECT_SOAK_RUNS=%d KBISECT_SOAK_PARALLEL=%d go test ./cmd/kbisect -run '^TestSoak$' -v -timeout 24h", seed, runs, parallel)
	results := make([]*soakResult, len(plans))
	var mu sync.Mutex
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	started := time.Now()
	for i, p := range plans {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r := p.run(context.Background())
			mu.Lock()
			defer mu.Unlock()
			results[i] = r
			t.Logf("run %d/%d (%s, seed %d, %d commits): %s, %d stop(s) naming the fault, %d kill(s), %.0fs %s",
				i+1, len(plans), p.inv.Fault, p.inv.Seed, p.inv.Commits, r.outcome, r.named, r.kills, r.took.Seconds(), strings.Join(r.problems, "; "))
			writeSoakTable(t, command, results, time.Since(started))
		}()
	}
	wg.Wait()
	table := writeSoakTable(t, command, results, time.Since(started))
	t.Log("\n" + table)
	for _, r := range results {
		if r.outcome == soakWrong || len(r.problems) > 0 {
			t.Errorf("%s (seed %d, %d commits, dir %s): %s; %s", r.inv.Fault, r.inv.Seed, r.inv.Commits, r.inv.Dir, r.outcome, strings.Join(r.problems, "; "))
		}
	}
}

func soakEnv(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: a positive number", name, v)
	}
	return n
}

// How a run ended.
const (
	soakRight        = "right"
	soakInconclusive = "inconclusive"
	soakWrong        = "wrong found"
	soakUnfinished   = "no answer"
)

// soakPlan is a run: its scenario, the progress line after which its
// first kbisect is SIGKILLed, and the one after which a disk fault fills
// its file system.
type soakPlan struct {
	inv                soakInvocation
	killLine, fillLine int
}

type soakResult struct {
	inv     soakInvocation
	outcome string
	// named counts the stops (exit 1) that named the lab's fault;
	// skips the commits the journal skipped.
	named, skips   int
	kills, resumes int
	killPhase      string
	problems       []string
	took           time.Duration
}

// soakNamed is what a stop must say to name each fault (lower case).
var soakNamed = map[string]*regexp.Regexp{
	soakHang:        regexp.MustCompile(`keepalive|power|unreachable|connection|did not come back|not answer`),
	soakSSHDrop:     regexp.MustCompile(`connection|ssh`),
	soakHostKey:     regexp.MustCompile(`host key`),
	soakWrongKernel: regexp.MustCompile(`6\.1\.0-0\.unexpected`),
	soakMissing:     regexp.MustCompile(`isol|nohz|command line|parameter`),
	soakStale:       regexp.MustCompile(`command line|parameter|cmdline`),
	soakBuildDisk:   regexp.MustCompile(`disk is full|no space left|free, less than`),
	soakStateDisk:   regexp.MustCompile(`no space left|free, less than`),
	soakPanic:       regexp.MustCompile(`panic|does not boot|did not come back`),
}

const soakMaxInvocations = 8

// run runs the plan's kbisect until it answers, killing it once and
// fixing the lab after a stop that named its fault.
func (p soakPlan) run(ctx context.Context) *soakResult {
	inv := p.inv
	r := &soakResult{inv: inv, outcome: soakUnfinished}
	started := time.Now()
	defer func() { r.took = time.Since(started) }()
	if err := os.MkdirAll(inv.Dir, 0o755); err != nil {
		r.problems = append(r.problems, err.Error())
		return r
	}
	// Each disk just over what the preflight asks to find free there.
	disk, size := "", ""
	switch inv.Fault {
	case soakBuildDisk:
		disk, size = filepath.Join(inv.Dir, "cache"), "2100m"
	case soakStateDisk:
		disk, size = filepath.Join(inv.Dir, "state"), "100m"
	}
	if disk != "" {
		if err := mountTmpfs(disk, size); err != nil {
			r.problems = append(r.problems, err.Error())
			return r
		}
		defer exec.Command("umount", "-l", disk).Run()
	}
	filled, keyAgain := false, false
	var journals soakJournals
	for n := 0; n < soakMaxInvocations; n++ {
		kill, fill := 0, 0
		if r.kills == 0 {
			kill = p.killLine
		}
		if disk != "" && inv.Armed && !filled {
			fill = p.fillLine
		}
		code, tail, killed, phase, didFill := inv.invoke(ctx, kill, fill, disk)
		filled = filled || didFill
		r.problems = append(r.problems, journals.check(filepath.Join(inv.Dir, "state"))...)
		if killed {
			r.kills++
			r.resumes++
			r.killPhase = phase
			continue
		}
		switch code {
		case exitOK:
			r.outcome = inv.judge()
		case exitInconclusive, exitNotReproduced:
			r.outcome = soakInconclusive
		case exitFailure:
			armed := inv.Armed || inv.KeyChanged || filled
			if re := soakNamed[inv.Fault]; armed && re != nil && re.MatchString(strings.ToLower(tail)) {
				r.named++
			} else {
				r.problems = append(r.problems, fmt.Sprintf("stopped (exit 1) without naming %q: %s", inv.Fault, lastLine(tail)))
			}
			// The user fixes the lab and resumes; a changed host key
			// is first checked to stop the resumed run again.
			if inv.Fault == soakHostKey && inv.Armed && !keyAgain {
				keyAgain, inv.KeyChanged = true, true
			} else {
				inv.KeyChanged = false
			}
			inv.Armed = false
			if filled {
				os.Remove(filepath.Join(disk, ".soak-filler"))
			}
			r.resumes++
			continue
		default:
			r.problems = append(r.problems, fmt.Sprintf("exit %d: %s", code, lastLine(tail)))
		}
		break
	}
	if inv.Fault == soakHostKey && keyAgain && r.named < 2 {
		r.problems = append(r.problems, "the run resumed on a changed host key did not stop naming it")
	}
	if r.outcome == soakUnfinished && len(r.problems) == 0 {
		r.problems = append(r.problems, fmt.Sprintf("no answer after %d invocations", soakMaxInvocations))
	}
	r.skips = journals.skips
	r.problems = append(r.problems, inv.treeProblems()...)
	r.problems = slices.Compact(append(r.problems, inv.skipProblems()...))
	return r
}

// invoke runs kbisect once in a child process: killed with SIGKILL just
// after progress line kill (0: never), the disk filled after line fill.
// It returns the exit code, the end of stderr, whether it was killed and
// at which phase, and whether the disk was filled.
func (inv soakInvocation) invoke(ctx context.Context, kill, fill int, disk string) (code int, tail string, killed bool, phase string, filled bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	spec, _ := json.Marshal(inv)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSoakChild$")
	cmd.Env = append(os.Environ(), "KBISECT_SOAK_CHILD="+string(spec), "KBISECT_SOAK=")
	logf, err := os.OpenFile(inv.Dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return -1, err.Error(), false, "", false
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== invocation: armed %v, key changed %v, kill at line %d, fill at line %d\n", inv.Armed, inv.KeyChanged, kill, fill)
	cmd.Stdout = logf
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return -1, err.Error(), false, "", false
	}
	if err := cmd.Start(); err != nil {
		return -1, err.Error(), false, "", false
	}
	var last []string
	s := bufio.NewScanner(pipe)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; s.Scan(); line++ {
		text := s.Text()
		fmt.Fprintln(logf, text)
		last = append(last, text)
		if len(last) > 12 {
			last = last[1:]
		}
		if line == fill {
			fillDisk(disk)
			filled = true
			fmt.Fprintln(logf, "=== the disk is full now")
		}
		if line == kill {
			time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond) // into the phase the line began
			_ = cmd.Process.Kill()
			killed, phase = true, soakPhase(text)
			fmt.Fprintln(logf, "=== SIGKILL ("+phase+")")
		}
	}
	err = cmd.Wait()
	code = cmd.ProcessState.ExitCode()
	if ctx.Err() != nil {
		return -1, "kbisect did not end in 10 minutes", false, "", filled
	}
	if killed && err != nil && code == -1 {
		return code, strings.Join(last, "\n"), true, phase, filled
	}
	return code, strings.Join(last, "\n"), false, "", filled
}

// soakPhase is what kbisect was doing when a progress line was its last.
func soakPhase(line string) string {
	for _, p := range []struct{ re, phase string }{
		{` build`, "build"}, {` boot$`, "boot"}, {`sample \d`, "measure"}, {`is (good|bad)|skip`, "verdict"},
		{`Measuring|^\[`, "choose"}, {`calibrat|costs`, "calibration"}, {`preflight|base command line`, "preflight"},
		{`reports:`, "report"},
	} {
		if regexp.MustCompile(p.re).MatchString(line) {
			return p.phase
		}
	}
	return "other"
}

func lastLine(tail string) string {
	lines := strings.Split(strings.TrimSpace(tail), "\n")
	return lines[len(lines)-1]
}

// judge reads the run's answer: the planted regression found, or another.
func (inv soakInvocation) judge() string {
	var out struct {
		FirstBad string `json:"first_bad"`
	}
	b, err := os.ReadFile(inv.Out)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	lab, lerr := readSoakLab(inv.Dir)
	if err != nil || lerr != nil || out.FirstBad == "" || out.FirstBad != lab.Tree.Regression {
		return soakWrong
	}
	return soakRight
}

type soakLab struct {
	Tree struct {
		Dir, BadCommit, Regression string
		Broken                     []string
	}
}

// skipProblems finds a skip the lab caused: a kernel that does not
// build whose commit builds, one that does not boot without a fault of
// its own, a skip of another class but the noise's.
func (inv soakInvocation) skipProblems() []string {
	lab, err := readSoakLab(inv.Dir)
	if err != nil {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(inv.Dir, "state", "search.jsonl"))
	if err != nil {
		return nil
	}
	var problems []string
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r struct {
			Kind, Commit, Built, Reason string
			Reverted                    bool
			Failure                     struct{ Class string }
		}
		if json.Unmarshal(line, &r) != nil || r.Kind != "skip" {
			continue
		}
		switch {
		case r.Failure.Class == "does-not-build" && (r.Reverted || slices.Contains(lab.Tree.Broken, r.Commit)):
		case r.Failure.Class == "does-not-boot" && inv.Fault == soakPanic:
		case r.Failure.Class == "unsure":
		default:
			problems = append(problems, fmt.Sprintf("SKIP FROM THE LAB: %s skipped (%s): %s", r.Commit, r.Failure.Class, r.Reason))
		}
	}
	return problems
}

func readSoakLab(dir string) (soakLab, error) {
	var l soakLab
	b, err := os.ReadFile(filepath.Join(dir, "lab.json"))
	if err != nil {
		return l, err
	}
	return l, json.Unmarshal(b, &l)
}

// treeProblems checks the user's tree: clean, on its branch, HEAD where
// it was made.
func (inv soakInvocation) treeProblems() []string {
	lab, err := readSoakLab(inv.Dir)
	if err != nil {
		return nil // no lab made: nothing to check
	}
	status, err := exec.Command("git", "-C", lab.Tree.Dir, "status", "--porcelain").Output()
	if err != nil || len(bytes.TrimSpace(status)) > 0 {
		return []string{fmt.Sprintf("the tree is not clean (%v): %s", err, status)}
	}
	head, err := exec.Command("git", "-C", lab.Tree.Dir, "rev-parse", "HEAD").Output()
	branch, berr := exec.Command("git", "-C", lab.Tree.Dir, "symbolic-ref", "HEAD").Output()
	if err != nil || berr != nil || strings.TrimSpace(string(head)) != lab.Tree.BadCommit || strings.TrimSpace(string(branch)) != "refs/heads/master" {
		return []string{fmt.Sprintf("the tree's HEAD moved: %s %s", head, branch)}
	}
	return nil
}
