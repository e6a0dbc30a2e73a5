package kbuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKconfigSaysWhatEachOptionDependsOn(t *testing.T) {
	kc, err := ReadKconfig("testdata/tree")
	if err != nil {
		t.Fatal(err)
	}
	for sym, want := range map[string]string{
		"PREEMPT_RT":      "EXPERT && ARCH_SUPPORTS_RT",
		"NO_HZ_FULL":      "SMP && HAVE_CONTEXT_TRACKING_USER",
		"PREEMPT_DYNAMIC": "PREEMPTION && HAVE_PREEMPT_DYNAMIC", // the if block's condition, then its own
		"EXPERT":          "",
	} {
		if got := strings.Join(kc.DependsOn[sym], " && "); got != want {
			t.Errorf("%s depends on %q, want %q", sym, got, want)
		}
	}
}

// TestADroppedPreemptRTIsCaughtWithItsReason is the trap of the QEMU lab
// work: a fragment without EXPERT loses PREEMPT_RT to olddefconfig
// without a word.
func TestADroppedPreemptRTIsCaughtWithItsReason(t *testing.T) {
	frag := filepath.Join(t.TempDir(), "rt.config")
	if err := os.WriteFile(frag, []byte("# only RT\nCONFIG_PREEMPT_RT=y\nCONFIG_NO_HZ_FULL=y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	req, err := LoadRequest([]string{frag}, []string{`CONFIG_LOCALVERSION="-kbisect-0123456789ab"`, "# CONFIG_DEBUG_PREEMPT is not set"})
	if err != nil {
		t.Fatal(err)
	}
	final, err := ReadConfigFile("testdata/defconfig-without-expert.config")
	if err != nil {
		t.Fatal(err)
	}
	kc, err := ReadKconfig("testdata/tree")
	if err != nil {
		t.Fatal(err)
	}
	dropped := Verify(req, final, kc)
	if len(dropped) != 1 {
		t.Fatalf("dropped %v", dropped)
	}
	want := "CONFIG_PREEMPT_RT=y was dropped (CONFIG_PREEMPT_RT not set; asked by " + frag + ":2): depends on EXPERT && ARCH_SUPPORTS_RT, and CONFIG_EXPERT is not set"
	if got := dropped[0].String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestTheProjectsRTFragmentIsRequestedWhole(t *testing.T) {
	req, err := LoadRequest([]string{"../configs/fragments/preempt-rt.config"}, []string{"CONFIG_HZ_1000=y", "CONFIG_EXPERT=y"})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, o := range req.Options {
		names[o.Name] = o.Value
	}
	for _, n := range []string{"CONFIG_EXPERT", "CONFIG_PREEMPT_RT", "CONFIG_NO_HZ_FULL", "CONFIG_RCU_NOCB_CPU", "CONFIG_CPU_ISOLATION", "CONFIG_OSNOISE_TRACER", "CONFIG_TIMERLAT_TRACER", "CONFIG_HIST_TRIGGERS", "CONFIG_HZ_1000"} {
		if names[n] != "y" {
			t.Errorf("%s = %q", n, names[n])
		}
	}
	if len(req.Redefined) != 0 {
		t.Errorf("CONFIG_EXPERT=y twice with the same value is no redefinition: %v", req.Redefined)
	}
	// A later value wins, and the change is said, as merge_config.sh does.
	req, _ = LoadRequest([]string{"../configs/fragments/preempt-rt.config"}, []string{"# CONFIG_HIST_TRIGGERS is not set"})
	if len(req.Redefined) != 1 || !strings.Contains(req.Redefined[0], "CONFIG_HIST_TRIGGERS=y (../configs/fragments/preempt-rt.config:") || !strings.HasSuffix(req.Redefined[0], "is redefined as n by build.options[0]") {
		t.Errorf("%v", req.Redefined)
	}
	if !strings.Contains(req.Fragment(), "# CONFIG_HIST_TRIGGERS is not set\n") || !strings.Contains(req.Fragment(), "CONFIG_PREEMPT_RT=y\n") {
		t.Errorf("fragment:\n%s", req.Fragment())
	}
}

func TestConfigFilesAreReadStrictly(t *testing.T) {
	if _, err := ReadConfig(strings.NewReader("CONFIG_A=y\nCONFIG_B=maybe\n")); err == nil || err.Error() != "line 2: CONFIG_B: the value must be y, m, n, a number or a \"quoted string\"" {
		t.Errorf("got %v", err)
	}
	c, err := ReadConfig(strings.NewReader("CONFIG_A=y\n# CONFIG_B is not set\n# comment\nCONFIG_C=\"x\"\n"))
	if err != nil || c.Get("CONFIG_A") != "y" || c.Get("CONFIG_B") != "n" || c.Get("CONFIG_C") != `"x"` || c.Get("CONFIG_D") != "n" {
		t.Errorf("%v %v", c, err)
	}
}
