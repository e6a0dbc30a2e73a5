package lab

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"kbisect/configs"
	"kbisect/internal/simhost"
)

// TestAResumedRunWaitsForAHostThatIsRebooting: a host that drops the
// connection before the handshake is a problem at once for a run that
// starts, and is waited for when the run resumes (the run before may have
// stopped in the middle of a reboot).
func TestAResumedRunWaitsForAHostThatIsRebooting(t *testing.T) {
	job, sim := hostJob(t, simhost.Kernel{Release: "6.12.57", Cmdline: "quiet"})
	sim.SetCPUs(4)
	tree := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", tree).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	job.Build.Tree = configs.Path(tree)
	job.Boot.PowerCycle = configs.Command(sim.PowerCycleCommand)

	sim.RefuseConnections(2)
	rd, err := Preflight(context.Background(), job, PreflightOptions{})
	if err != nil || len(rd.Problems) != 1 || rd.Facts != nil || !strings.Contains(rd.Problems[0].What, "handshake") {
		t.Fatalf("a run that starts: %v %+v", err, rd)
	}

	sim.RefuseConnections(2)
	var said []string
	say := func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) }
	rd, err = Preflight(context.Background(), job, PreflightOptions{Resume: true, Say: say})
	if err != nil || rd.Err() != nil || rd.Facts == nil || rd.Facts.Release != "6.12.57" {
		t.Fatalf("a run that resumes: %v %+v", err, rd)
	}
	if len(said) != 1 || !strings.Contains(said[0], "the run before may have stopped during a reboot: waiting up to") {
		t.Errorf("said %q", said)
	}
}

// TestSudoWithoutNOPASSWDIsNamedWithItsFix: host.sudo on a host whose sudo
// asks for a password is found by the preflight, with what to change.
func TestSudoWithoutNOPASSWDIsNamedWithItsFix(t *testing.T) {
	job, sim := hostJob(t, simhost.Kernel{Release: "6.12.57", Cmdline: "quiet"})
	sim.SetCPUs(4)
	job.Host.Sudo = true
	sim.SudoNeedsPassword()
	rd, err := Preflight(context.Background(), job, PreflightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, p := range rd.Problems {
		found = found || (strings.Contains(p.What, "host.sudo needs passwordless sudo for root") &&
			p.Fix == "give root passwordless sudo on the host (NOPASSWD in sudoers), or log in as root")
	}
	if !found {
		t.Errorf("%+v", rd.Problems)
	}
}
