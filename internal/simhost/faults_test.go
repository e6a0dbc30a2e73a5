package simhost_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"kbisect/internal/simhost"
	"kbisect/remote"
)

// A host that hangs in the middle of a measurement answers nothing more,
// keepalives included, and refuses new connections, until its power cycle
// brings its default kernel back.
func TestAHungHostAnswersNothingUntilItsPowerCycle(t *testing.T) {
	sim, opt := lab(t, 6)
	opt.Keepalive = 100 * time.Millisecond
	sim.HangMeasurement(1)
	h := dial(t, opt)
	started := time.Now()
	_, _, err := seedWorkload(t, isolated).Measure(context.Background(), h)
	var ie *remote.InfraError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "keepalives") || time.Since(started) < 300*time.Millisecond {
		t.Fatalf("the hung measurement: %T %v after %v; want the keepalives unanswered", err, err, time.Since(started))
	}
	if c, err := remote.Dial(context.Background(), opt); err == nil {
		c.Close()
		t.Fatal("a hung host took a new connection")
	}
	if err := sim.Cycle(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for sim.Running().Release != labKernel || len(sim.Boots()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no power cycle: boots %q", sim.Boots())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if f, err := dial(t, opt).Facts(context.Background()); err != nil || f.Release != labKernel {
		t.Fatalf("after the power cycle: %+v %v", f, err)
	}
	if b := sim.Boots(); b[0] != labKernel+" (hung)" || b[1] != labKernel+" (power cycle)" {
		t.Errorf("boots %q", b)
	}
}

// A command whose connection drops once it ran did what it does, and the
// client hears only that the connection was lost; the next command on a
// new connection is answered.
func TestACommandThatLosesItsConnectionRanAndTheClientDoesNotKnow(t *testing.T) {
	sim, opt := lab(t, 7)
	sim.DropCommand(2)
	ctx := context.Background()
	h := dial(t, opt)
	if _, err := h.Facts(ctx); err != nil {
		t.Fatalf("the first command: %v", err)
	}
	_, err := h.Facts(ctx)
	var ie *remote.InfraError
	if !errors.As(err, &ie) {
		t.Fatalf("the dropped command: %T %v", err, err)
	}
	if f, err := dial(t, opt).Facts(ctx); err != nil || f.Release != labKernel {
		t.Errorf("the third: %+v %v", f, err)
	}
}

// A host whose key changes after a boot is refused by a client that knows
// its old key, which names the change; a resumed host has its own key back.
func TestAHostKeyChangedAfterABootIsRefused(t *testing.T) {
	dir := t.TempDir()
	def := simhost.Kernel{Release: labKernel, Cmdline: "BOOT_IMAGE=/boot/vmlinuz-" + labKernel + " ro " + labParams}
	sim, err := simhost.New(dir, def)
	if err != nil {
		t.Fatal(err)
	}
	_, opt := lab(t, 8)
	opt.Port, opt.Identity = sim.Port, sim.Identity
	if err := os.WriteFile(opt.KnownHosts, []byte(sim.KnownHostsLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sim.ChangeHostKeyAfterBoot(1)
	if err := sim.Cycle(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !sim.HostKeyChanged() {
		if time.Now().After(deadline) {
			t.Fatal("the key did not change at the boot")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, err = remote.Dial(context.Background(), opt)
	var hk *remote.HostKeyError
	if !errors.As(err, &hk) || !hk.Changed {
		t.Fatalf("dialling a host whose key changed: %T %v", err, err)
	}
	sim.Close()
	again, err := simhost.Resume(dir, def)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.HostKeyChanged() || again.KnownHostsLine != sim.KnownHostsLine {
		t.Fatal("the resumed host did not get its own key back")
	}
	if f, err := dial(t, opt).Facts(context.Background()); err != nil || f.Release != labKernel {
		t.Errorf("the resumed host: %+v %v", f, err)
	}
}

// A share of the kernels fails at boot, each every time, the host's own
// kernel never.
func TestABootFaultShareHitsTheSameKernelsEveryTime(t *testing.T) {
	sim, _ := lab(t, 9)
	sim.SetBootFaultShare(simhost.FaultPanicReboot, 0.3)
	hit := 0
	for i := 0; i < 200; i++ {
		rel := "6.12.57-kbisect-" + strings.Repeat("a", i%7) + string(rune('a'+i%26)) + strings.Repeat("0", i/26)
		if sim.BootFault(rel) != sim.BootFault(rel) {
			t.Fatalf("%s: the fault changes", rel)
		}
		if sim.BootFault(rel) == simhost.FaultPanicReboot {
			hit++
		}
	}
	if hit < 40 || hit > 80 || sim.BootFault(labKernel) != simhost.FaultNone {
		t.Errorf("%d of 200 kernels panic (want about 60), the default kernel's fault %v", hit, sim.BootFault(labKernel))
	}
}
