package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"kbisect/internal/simhost"
	"kbisect/internal/simlab"
	"kbisect/internal/simnoise"
)

// The soak's faults: what goes wrong in a run's lab.
const (
	soakNone        = "none"
	soakFlakyNoise  = "flaky noise"
	soakBadBoots    = "bad boots"
	soakBroken      = "broken builds"
	soakPanic       = "panic at boot"
	soakWrongKernel = "wrong kernel"
	soakMissing     = "missing parameters"
	soakStale       = "stale parameters"
	soakHang        = "host hangs mid-measurement"
	soakSSHDrop     = "SSH drop mid-command"
	soakHostKey     = "host key changed"
	soakClockJump   = "clock jump"
	soakBuildDisk   = "disk full mid-build"
	soakStateDisk   = "disk full on the state dir"
)

// soakFaults are the soak's faults, in the table's order.
var soakFaults = []string{soakNone, soakFlakyNoise, soakBadBoots, soakBroken, soakPanic, soakWrongKernel, soakMissing,
	soakStale, soakHang, soakSSHDrop, soakHostKey, soakClockJump, soakBuildDisk, soakStateDisk}

// soakInvocation is one kbisect run of a soak scenario in a child
// process: the lab in Dir (made by the first, reopened by the next),
// the faults armed on its host, the JSON answer written to Out.
type soakInvocation struct {
	Dir, Out               string
	Seed                   int64
	Commits                int
	Noise                  string
	BrokenBuilds           int
	BrokenBeforeRegression bool
	// Fault is the scenario's fault; Armed says the lab has it now
	// (false: the lab was fixed). At is which boot, measurement or
	// command it strikes, Share the kernels it strikes.
	Fault string
	Armed bool
	At    int
	Share float64
	// KeyChanged: the host answers with another key from the start, as
	// it did when the run before stopped.
	KeyChanged bool
}

// TestSoakChild is one invocation of TestSoak's scenarios, run by it in a
// child process that it may SIGKILL.
func TestSoakChild(t *testing.T) {
	spec := os.Getenv("KBISECT_SOAK_CHILD")
	if spec == "" {
		t.Skip("a child process of TestSoak (KBISECT_SOAK=1)")
	}
	var inv soakInvocation
	if err := json.Unmarshal([]byte(spec), &inv); err != nil {
		t.Fatal(err)
	}
	os.Exit(inv.run(context.Background(), os.Stderr))
}

// run makes or reopens the lab, arms its faults and runs kbisect's run
// --job path on it, as kbisect demo does; it returns the exit code.
func (inv soakInvocation) run(ctx context.Context, stderr io.Writer) int {
	model, err := simnoise.Parse(inv.Noise)
	if err != nil {
		return exitCode(ctx, err, stderr)
	}
	l, err := simlab.New(inv.Dir, simlab.Options{Seed: inv.Seed, Commits: inv.Commits, Noise: model,
		BrokenBuilds: inv.BrokenBuilds, BrokenBeforeRegression: inv.BrokenBeforeRegression})
	if err != nil {
		return exitCode(ctx, err, stderr)
	}
	defer l.Close()
	if err := inv.arm(l.Host); err != nil {
		return exitCode(ctx, err, stderr)
	}
	out, err := os.Create(inv.Out)
	if err != nil {
		return exitCode(ctx, err, stderr)
	}
	defer out.Close()
	ro := runOptions{Job: l.JobFile, Jobs: []string{l.JobFile}, Goods: []string{l.Tree.Good}, Bad: l.Tree.Bad,
		State: filepath.Join(inv.Dir, "state"), JSON: true}
	res, err := runJob(ctx, ro, stderr)
	defer res.Close()
	return exitCode(ctx, answer(true, res, err, out, nil), stderr)
}

// arm gives the host the invocation's fault. The disks' faults are the
// parent's: it fills their file systems.
func (inv soakInvocation) arm(h *simhost.Host) error {
	if inv.KeyChanged {
		return h.ChangeHostKey()
	}
	if !inv.Armed {
		return nil
	}
	switch inv.Fault {
	case soakPanic:
		h.SetBootFaultShare(simhost.FaultPanicReboot, inv.Share)
	case soakWrongKernel:
		h.SetBootFaultShare(simhost.FaultWrongRelease, inv.Share)
	case soakMissing:
		h.SetBootFaultShare(simhost.FaultNoIsolation, inv.Share)
	case soakStale:
		h.SetBootFaultShare(simhost.FaultStaleCmdline, inv.Share)
	case soakHang:
		h.HangMeasurement(inv.At)
	case soakSSHDrop:
		h.DropCommand(inv.At)
	case soakHostKey:
		h.ChangeHostKeyAfterBoot(inv.At)
	case soakClockJump:
		jump := 240 * time.Hour
		if inv.At%2 == 0 {
			jump = -jump // back to the boot, and below: it stops at zero
		}
		h.JumpClock(inv.At, jump)
	}
	return nil
}

// newSoakScenario draws run i's scenario from the soak's seed: its
// fault (in turn), its lab and where the fault strikes.
func newSoakScenario(rng *rand.Rand, i int, root string) soakInvocation {
	fault := soakFaults[i%len(soakFaults)]
	inv := soakInvocation{Dir: filepath.Join(root, fmt.Sprintf("run-%03d", i)), Seed: rng.Int64N(1 << 40),
		Commits: 60 + rng.IntN(61), Fault: fault, Armed: true, BrokenBuilds: 1 + rng.IntN(2)}
	inv.Out = inv.Dir + ".json"
	switch fault {
	case soakFlakyNoise:
		inv.Noise = []string{"spread=0.2,spikes=5%:2-20x", "spread=0.2,flips=5%", "spread=0.3,spikes=10%:2-20x,flips=2%"}[rng.IntN(3)]
	case soakBadBoots:
		inv.Noise = []string{"spread=0.2,bad-boots=5%", "spread=0.2,boot-spread=0.1,bad-boots=10%", "spread=0.1,stray-boots=25%:20-60%"}[rng.IntN(3)]
	case soakBroken:
		inv.BrokenBuilds = 4 + rng.IntN(5)
		inv.BrokenBeforeRegression = rng.IntN(3) == 0
	case soakPanic:
		inv.Share = 0.1 + 0.2*rng.Float64()
	case soakWrongKernel, soakMissing, soakStale:
		inv.Share = 0.05 + 0.15*rng.Float64()
	case soakHang, soakClockJump:
		inv.At = 1 + rng.IntN(40) // of ~40–80 measurements
	case soakSSHDrop:
		inv.At = 1 + rng.IntN(150) // of ~200–400 commands
	case soakHostKey:
		inv.At = 1 + rng.IntN(15) // of ~15–30 boots
	}
	return inv
}
