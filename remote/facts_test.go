package remote

import (
	"context"
	"kbisect/internal/sshtest"
	"strings"
	"testing"
)

const seedParams = "nohz_full=1-16,33-48 isolcpus=nohz,domain,managed_irq,1-16,33-48 rcu_nocbs=1-31,33-63 kthread_cpus=0,32 irqaffinity=17-31,49-63"

func seedFacts() Facts {
	return Facts{Release: "6.12.78-kbisect", Version: "#1 SMP PREEMPT_RT Tue Nov 10", BootID: "b1",
		Cmdline:  "BOOT_IMAGE=/boot/vmlinuz-6.12.78-kbisect root=/dev/sda1 ro " + seedParams + " console=ttyS1,115200",
		Isolated: "1-16,33-48", NohzFull: "1-16,33-48", PreemptRT: true}
}

func TestTheSeedHostPassesItsChecks(t *testing.T) {
	if bad := seedFacts().Check(Expect{Release: "6.12.78-kbisect", Params: seedParams, PreemptRT: true}); len(bad) != 0 {
		t.Errorf("%q", bad)
	}
}

func TestEveryDifferenceIsNamed(t *testing.T) {
	f := seedFacts()
	f.Release = "6.12.57"
	f.Version = "#1 SMP PREEMPT_DYNAMIC"
	f.PreemptRT = false
	f.Cmdline = strings.Replace(f.Cmdline, "rcu_nocbs=1-31,33-63", "rcu_nocbs=1-31", 1)
	f.Cmdline = strings.Replace(f.Cmdline, " kthread_cpus=0,32", "", 1)
	f.NohzFull = ""
	f.Isolated = "1-16"
	bad := f.Check(Expect{Release: "6.12.78-kbisect", Params: seedParams, PreemptRT: true})
	want := []string{
		"the running kernel is 6.12.57, not 6.12.78-kbisect",
		"PREEMPT_RT is not active (uname -v: #1 SMP PREEMPT_DYNAMIC)",
		"the command line has rcu_nocbs=1-31, not rcu_nocbs=1-31,33-63",
		"kthread_cpus=0,32 is not on the kernel command line",
		`/sys/devices/system/cpu/isolated says "1-16", not 1-16,33-48: isolcpus is not in effect`,
		`/sys/devices/system/cpu/nohz_full says "", not 1-16,33-48: nohz_full is not in effect (is CONFIG_NO_HZ_FULL on?)`,
	}
	if strings.Join(bad, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(bad, "\n\t"), strings.Join(want, "\n\t"))
	}
}

func TestFactsOfARealHost(t *testing.T) {
	s := sshtest.Start(t)
	h := dial(t, options(s))
	f, err := h.Facts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	local, _ := sshtest.RunLocal("uname", "-r")
	if f.Release != strings.TrimSpace(string(local)) || len(f.BootID) != 36 || f.Cmdline == "" {
		t.Errorf("%+v", f)
	}
	if bad := f.Check(Expect{Params: "nohz_full=1"}); len(bad) == 0 {
		t.Error("a host without nohz_full passed the check")
	}
}
