package kbuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKconfigSaysWhatEachOptionDependsOn(t *testing.T) {
	kc, err := ReadKconfig("testdata/tree", "x86")
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
	kc, err := ReadKconfig("testdata/tree", "x86")
	if err != nil {
		t.Fatal(err)
	}
	dropped := Verify(req, final, kc)
	if len(dropped) != 1 {
		t.Fatalf("dropped %v", dropped)
	}
	want := "CONFIG_PREEMPT_RT=y was dropped (CONFIG_PREEMPT_RT not set; asked by " + frag + ":2): depends on EXPERT && ARCH_SUPPORTS_RT, and CONFIG_EXPERT is not set; its choice took CONFIG_PREEMPT_VOLUNTARY=y"
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

// TestKconfigIsReadAsKconfigReadsIt covers what the real 6.12 tree showed
// a naive reader: help texts that read like properties, other
// architectures' files, menus that add a dependency, and choices.
func TestKconfigIsReadAsKconfigReadsIt(t *testing.T) {
	kc, err := ReadKconfig("testdata/tree", "x86")
	if err != nil {
		t.Fatal(err)
	}
	for sym, want := range map[string]string{
		"LOCALVERSION_AUTO": "",                  // its help says "depends on a git-based tree"
		"HZ_1000":           "!HZ_PERIODIC_ONLY", // the menu's; not arch/arm's HZ_FIXED = 0, nor its help's
		"HZ_FIXED":          "",
	} {
		if got := strings.Join(kc.DependsOn[sym], " && "); got != want {
			t.Errorf("%s depends on %q, want %q", sym, got, want)
		}
	}
	if got := strings.Join(kc.Choice["HZ_1000"], " "); got != "HZ_100 HZ_250 HZ_1000" {
		t.Errorf("HZ_1000's choice is %q", got)
	}
	if _, ok := kc.DependsOn["HZ_FIXED"]; ok {
		t.Error("arch/arm/Kconfig was read for an x86 build")
	}
	arm, err := ReadKconfig("testdata/tree", "arm")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(arm.DependsOn["HZ_1000"], " && "); got != "!HZ_PERIODIC_ONLY && HZ_FIXED = 0" {
		t.Errorf("on arm HZ_1000 depends on %q", got)
	}
	if _, err := ReadKconfig(t.TempDir(), "x86"); err == nil {
		t.Error("a tree without a Kconfig file was read without an error")
	}
}

// TestTheRequestIsMergedLastSoItsChoiceWins: kconfig lets the last of a
// choice's alternatives set to y win, so the request's lines must come
// after the base's (the base's CONFIG_HZ_250=y sorted after a requested
// CONFIG_HZ_1000=y would win).
func TestTheRequestIsMergedLastSoItsChoiceWins(t *testing.T) {
	base := "# Automatically generated file; DO NOT EDIT.\nCONFIG_CC_OPTIMIZE_FOR_SIZE=y\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n# CONFIG_PREEMPT_RT is not set\nCONFIG_LOCALVERSION=\"\""
	req := Request{Options: []Option{
		{Name: "CONFIG_HZ_1000", Value: "y"},
		{Name: "CONFIG_PREEMPT_RT", Value: "y"},
		{Name: "CONFIG_CC_OPTIMIZE_FOR_SIZE", Value: "n"},
		{Name: "CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE", Value: "y"},
		{Name: "CONFIG_LOCALVERSION", Value: `"-kbisect-0123456789ab"`},
	}}
	want := "# Automatically generated file; DO NOT EDIT.\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n" +
		"CONFIG_HZ_1000=y\nCONFIG_PREEMPT_RT=y\n# CONFIG_CC_OPTIMIZE_FOR_SIZE is not set\nCONFIG_CC_OPTIMIZE_FOR_PERFORMANCE=y\nCONFIG_LOCALVERSION=\"-kbisect-0123456789ab\"\n"
	if got := string(mergeConfig([]byte(base), req)); got != want {
		t.Errorf("merged:\n%s\nwant:\n%s", got, want)
	}
}
