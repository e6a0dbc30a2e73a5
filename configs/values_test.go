package configs

import (
	"strings"
	"testing"
	"time"
)

func TestParseCPUsReadsKernelCpulists(t *testing.T) {
	for _, tc := range []struct {
		in   string
		nr   int
		want string
		err  string
	}{
		{in: "1-16,33-48", want: "1-16,33-48"},
		{in: "0", want: "0"},
		{in: "5,3,4,1", want: "1,3-5"},
		{in: " 1-3 , 7", want: "1-3,7"},
		{in: "0-15:2/4", want: "0-1,4-5,8-9,12-13"},
		{in: "all", nr: 4, want: "0-3"},
		{in: "1-N", nr: 8, want: "1-7"},
		{in: "0-7", nr: 8, want: "0-7"},
		{in: "all", err: `"all" needs machine.cpus`},
		{in: "1-N", err: `"N" (the last CPU) needs machine.cpus`},
		{in: "0-8", nr: 8, err: "CPU 8 is outside the machine (machine.cpus: 8, CPUs 0-7)"},
		{in: "3-1", err: "CPU range 3-1 runs backwards"},
		{in: "1,,2", err: "empty CPU list entry (write CPUs like 1-16,33-48)"},
		{in: "1-x", err: `"x" is not a CPU number`},
		{in: "-1", err: `"" is not a CPU number`},
		{in: "+1", err: `"+1" is not a CPU number`},
		{in: "0-4000000000", err: "CPU 4000000000 is beyond the kernel's limit of 8192 CPUs"},
		{in: "0-7:3/2", err: `bad CPU group "3/2" in "0-7:3/2" (write A-B:used/group, e.g. 0-63:1/2)`},
		{in: "3:1/2", err: `CPU group "3:1/2" needs a range (write A-B:used/group, e.g. 0-63:1/2)`},
		{in: "ALL:1/2", nr: 4, want: "0,2"},
		{in: ",1-2,", want: "1-2"},
	} {
		got, err := ParseCPUs(tc.in, tc.nr)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParseCPUs(%q, %d) = %v, %v; want error %q", tc.in, tc.nr, got, err, tc.err)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("ParseCPUs(%q, %d) = %q, %v; want %q", tc.in, tc.nr, got, err, tc.want)
		}
	}
}

func TestBootParamsOfTheSeedMachine(t *testing.T) {
	line := "nohz_full=1-16,33-48 isolcpus=nohz,domain,managed_irq,1-16,33-48 rcu_nocbs=1-31,33-63 kthread_cpus=0,32 irqaffinity=17-31,49-63"
	bp, err := ParseBootParams(line, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		param string
		got   CPUs
		want  string
	}{
		{"nohz_full", bp.NohzFull, "1-16,33-48"},
		{"isolcpus", bp.IsolCPUs, "1-16,33-48"},
		{"rcu_nocbs", bp.RCUNocbs, "1-31,33-63"},
		{"kthread_cpus", bp.KthreadCPUs, "0,32"},
		{"irqaffinity", bp.IRQAffinity, "17-31,49-63"},
		{"isolated", bp.Isolated(), "1-16,33-48"},
	} {
		if c.got.String() != c.want {
			t.Errorf("%s = %s, want %s", c.param, c.got, c.want)
		}
	}
	if strings.Join(bp.IsolFlags, ",") != "nohz,domain,managed_irq" {
		t.Errorf("isolcpus flags %v", bp.IsolFlags)
	}
	if len(bp.Isolated()) != 32 {
		t.Errorf("%d isolated CPUs, want the seed's 32", len(bp.Isolated()))
	}
}

func TestIsolatedCPUsFollowTheKernelsRules(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"nohz_full=1-7", "1-7"},
		{"isolcpus=2-3", "2-3"},                                 // no flags: domain
		{"isolcpus=nohz,managed_irq,2-3", "2-3"},                // tick isolation without domain
		{"nohz_full=1-7 isolcpus=domain,4-9", "4-7"},            // both: the CPUs in both
		{"nohz_full=1-3 isolcpus=managed_irq,1-2 quiet", "1-3"}, // managed_irq alone isolates nothing
		{`quiet dyndbg="file x +p" nohz_full=2`, "2"},           // quoted values with spaces
		{"rcu_nocbs irqaffinity=0", ""},                         // bare rcu_nocbs offloads all CPUs
	} {
		bp, err := ParseBootParams(tc.line, 10)
		if err != nil {
			t.Fatalf("%q: %v", tc.line, err)
		}
		if got := bp.Isolated().String(); got != tc.want {
			t.Errorf("Isolated(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
	bp, _ := ParseBootParams("rcu_nocbs nohz_full=2", 4)
	if bp.RCUNocbs == nil || len(bp.RCUNocbs) != 0 || bp.NoCallbackCPUs().String() != "2" {
		t.Errorf("bare rcu_nocbs = %v, offloaded %s; want none at boot but the nohz_full CPU", bp.RCUNocbs, bp.NoCallbackCPUs())
	}
}

func TestBootParamErrorsListEveryBadParameterAtItsOffset(t *testing.T) {
	line := "nohz_full=1-9 isolcpus=dom,1 rcu_nocbs=1-x irqaffinity"
	_, err := ParseBootParams(line, 8)
	errs, ok := err.(BootParamErrors)
	if !ok || len(errs) != 4 {
		t.Fatalf("got %v, want 4 errors", err)
	}
	for i, want := range []struct {
		at  string
		msg string
	}{
		{"1-9", "nohz_full: CPU 9 is outside the machine (machine.cpus: 8, CPUs 0-7)"},
		{"dom,", `isolcpus: unknown flag "dom" (isolcpus takes nohz, domain, managed_irq, then a CPU list)`},
		{"1-x", `rcu_nocbs: "x" is not a CPU number`},
		{"irqaffinity", "irqaffinity: no CPU list"},
	} {
		if errs[i].Error() != want.msg {
			t.Errorf("error %d = %q, want %q", i, errs[i], want.msg)
		}
		if !strings.HasPrefix(line[errs[i].Offset:], want.at) {
			t.Errorf("error %d points at %q, want %q", i, line[errs[i].Offset:], want.at)
		}
	}
}

func TestDurationsNeedUnitsAndPrintAsWritten(t *testing.T) {
	for in, want := range map[string]string{
		"20us": "20us", "20µs": "20us", "1.5ms": "1500us", "500ns": "500ns", "90s": "1m30s",
		"10m": "10m", "1h30m": "1h30m", "2h": "2h", "1s": "1s", "950ms": "950ms", "2.5us": "2.5us",
		"1h0m30s": "1h30s", "0s": "0s", "7d": "7d", "48h": "2d", "1.5d": "36h",
	} {
		d, err := ParseDuration(in)
		if err != nil || d.String() != want {
			t.Errorf("ParseDuration(%q) = %s, %v; want %s", in, d, err, want)
		}
		back, err := ParseDuration(d.String())
		if err != nil || back != d {
			t.Errorf("%q does not read back: %v, %v", d.String(), back, err)
		}
	}
	for in, want := range map[string]string{
		"60":       `"60" has no unit (write e.g. 60s, 60ms or 60us)`,
		"1 minute": `"1 minute" is not a duration (write e.g. 90s, 10m, 1h30m, 20us, 1.5ms)`,
		"-1s":      `"-1s" is negative`,
		"a week":   `"a week" is not a duration (write e.g. 90s, 10m, 1h30m, 20us, 1.5ms)`,
		"sevend":   `"sevend" is not a number of days (write e.g. 7d)`,
		"":         "empty duration",
	} {
		if _, err := ParseDuration(in); err == nil || err.Error() != want {
			t.Errorf("ParseDuration(%q) error %v, want %q", in, err, want)
		}
	}
	if d, _ := ParseDuration("1.5ms"); d.D() != 1500*time.Microsecond {
		t.Errorf("1.5ms = %v", d.D())
	}
}

func TestSizesAndThresholds(t *testing.T) {
	for in, want := range map[string]Size{"20GiB": 20 << 30, "512M": 512 << 20, "2G": 2 << 30, "1GB": 1e9, "1.5KiB": 1536} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if s := Size(20 << 30).String(); s != "20GiB" {
		t.Errorf("20GiB prints %s", s)
	}
	for _, bad := range []string{"20", "GiB", "-1G", "1e400G", "20 parsecs"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	for in, want := range map[string]Threshold{
		"auto":  {Kind: ThresholdAuto},
		"20us":  {Kind: ThresholdTime, Time: 20 * time.Microsecond},
		"1.5ms": {Kind: ThresholdTime, Time: 1500 * time.Microsecond},
		"3x":    {Kind: ThresholdRatio, Value: 3},
		"1.5×":  {Kind: ThresholdRatio, Value: 1.5},
		"99.5%": {Kind: ThresholdPercent, Value: 99.5},
		"100":   {Kind: ThresholdNumber, Value: 100},
	} {
		got, err := ParseThreshold(in)
		if err != nil || got != want {
			t.Errorf("ParseThreshold(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if back, _ := ParseThreshold(got.String()); back != got {
			t.Errorf("%q does not read back", got.String())
		}
	}
	for in, want := range map[string]string{
		"0.5x": "ratio 0.5x must be more than 1x (how many times worse than the good endpoint is bad)",
		"120%": "percentage 120% is not between 0% and 100%",
		"0us":  "threshold 0us is zero: every kernel would be bad",
		"fast": `"fast" is not a threshold (write a time like 20us or 1.5ms, a ratio like 3x, a percentage like 99.5%, a number, or auto)`,
	} {
		if _, err := ParseThreshold(in); err == nil || err.Error() != want {
			t.Errorf("ParseThreshold(%q) error %v, want %q", in, err, want)
		}
	}
}

func TestCommandSecretsStayNames(t *testing.T) {
	c := Command(`IPMI_PASSWORD="${BMC_PASSWORD}" ipmitool -E -U ${BMC_USER} \${LITERAL} $HOME ${KBISECT_RELEASE} ${BMC_PASSWORD}`)
	if got := strings.Join(c.Refs(), ","); got != "BMC_PASSWORD,BMC_USER" {
		t.Errorf("Refs = %s", got)
	}
	env, err := c.Env(testEnv)
	if err == nil || err.Error() != "environment variable BMC_USER is not set" {
		t.Errorf("Env error = %v, %v", env, err)
	}
	env, err = Command("x ${BMC_PASSWORD}").Env(testEnv)
	if err != nil || strings.Join(env, " ") != "BMC_PASSWORD=hunter2" {
		t.Errorf("Env = %v, %v", env, err)
	}
	if out, _ := c.MarshalYAML(); out != string(c) {
		t.Errorf("a command is shown as written, got %v", out)
	}
}

func TestConfigLines(t *testing.T) {
	for in, want := range map[string]ConfigOption{
		"CONFIG_PREEMPT_RT=y":             {"CONFIG_PREEMPT_RT", "y"},
		"# CONFIG_KASAN is not set":       {"CONFIG_KASAN", "n"},
		`CONFIG_LOCALVERSION="-rt \"x\""`: {"CONFIG_LOCALVERSION", `"-rt \"x\""`},
		"CONFIG_NR_CPUS=64":               {"CONFIG_NR_CPUS", "64"},
		"CONFIG_PHYSICAL_START=0x1000000": {"CONFIG_PHYSICAL_START", "0x1000000"},
		"  # a comment":                   {},
		"":                                {},
	} {
		got, err := ParseConfigLine(in)
		if err != nil || got != want {
			t.Errorf("ParseConfigLine(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"CONFIG_X", "CONFIG_X=yes", "PREEMPT_RT=y", `CONFIG_X="open`, "CONFIG_X=y # trailing"} {
		if _, err := ParseConfigLine(bad); err == nil {
			t.Errorf("ParseConfigLine(%q) accepted", bad)
		}
	}
}

func TestClosestKeyIsATypoNotAGuess(t *testing.T) {
	keys := []string{"address", "port", "user", "identity", "known_hosts", "jump", "sudo", "connect_timeout"}
	for in, want := range map[string]string{
		"adress": "address", "Port": "port", "usr": "user", "knwon_hosts": "known_hosts",
		"known-hosts": "known_hosts", "connect_timout": "connect_timeout", "colour": "", "password": "", "x": "",
	} {
		if got := closest(in, keys); got != want {
			t.Errorf("closest(%q) = %q, want %q", in, got, want)
		}
	}
}
