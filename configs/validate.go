package configs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// at is where key was set, or else where its nearest enclosing section
// was, or else the top of the job file: where a problem with a missing or
// defaulted key is best shown.
func (l *loader) at(key string) Pos {
	for k := range keyPath(key) {
		if p, ok := l.job.pos[k]; ok {
			return p
		}
		if p, ok := l.nullAt[k]; ok {
			return p
		}
	}
	return Pos{File: l.job.File, Line: 1, Col: 1}
}

// oneOf checks that key's value is one of valid, suggesting the nearest.
func (l *loader) oneOf(key, value string, valid []string) bool {
	if slices.Contains(valid, value) {
		return true
	}
	msg := fmt.Sprintf("%q is not one of %s", value, strings.Join(valid, ", "))
	if c := closest(value, valid); c != "" {
		msg += fmt.Sprintf("; did you mean %q?", c)
	}
	l.errorf(l.at(key), key, "%s", msg)
	return false
}

func (l *loader) durationRange(key string, d Duration, lo, hi time.Duration) {
	if !l.isSet(key) {
		return
	}
	if d.D() < lo || d.D() > hi {
		l.errorf(l.at(key), key, "%s is not between %s and %s", d, Duration(lo), Duration(hi))
	}
}

func (l *loader) intRange(key string, v, lo, hi int) bool {
	if v < lo || v > hi {
		l.errorf(l.at(key), key, "%d is not between %d and %d", v, lo, hi)
		return false
	}
	return true
}

// validate checks what decoding cannot: values against each other, CPU
// lists against the machine and the boot parameters, files that must exist.
func (l *loader) validate() {
	l.validateMachine()
	l.validateHost()
	bp := l.validateBoot()
	l.validateBuild()
	l.validateFarm()
	l.validateBuildHost()
	l.validateWorkload(bp)
	l.validateVerdict()
	l.validateReport()
	l.intRange("find_good.max_kernels", l.job.FindGood.MaxKernels, 1, 100)
	l.intRange("find_good.older_series", l.job.FindGood.OlderSeries, 0, 20)
	l.durationRange("nightly.baseline_max_age", l.job.Nightly.BaselineMaxAge, 0, 365*24*time.Hour)
	l.intRange("nightly.rounds", l.job.Nightly.Rounds, 1, 20)
}

var machineName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func (l *loader) validateMachine() {
	m := &l.job.Machine
	switch {
	case m.Name == "":
		l.missingf("machine.name", "missing: name the machine (it names state directories and reports)")
	case !machineName.MatchString(m.Name):
		l.errorf(l.at("machine.name"), "machine.name", "%q: use letters, digits, '.', '_' and '-' (it names files)", m.Name)
	}
	l.intRange("machine.cpus", m.CPUs, 0, MaxCPUs)
	l.intRange("machine.sockets", m.Sockets, 0, 64)
	l.intRange("machine.threads_per_core", m.ThreadsPerCore, 0, 8)
	if m.CPUs > 0 && m.Sockets > 0 && m.CPUs%m.Sockets != 0 {
		l.errorf(l.at("machine.sockets"), "machine.sockets", "%d CPUs do not split evenly over %d sockets", m.CPUs, m.Sockets)
	}
	var seen CPUs
	for i, node := range m.NUMANodes {
		key := fmt.Sprintf("machine.numa_nodes[%d]", i)
		if both := node.Intersect(seen); len(both) > 0 {
			l.errorf(l.at(key), key, "CPUs %s are already in an earlier node", both)
		}
		seen = append(seen, node.Minus(seen)...)
		slices.Sort(seen)
	}
	if len(m.NUMANodes) > 0 && m.CPUs > 0 && len(seen) != m.CPUs {
		l.warnf(l.at("machine.numa_nodes"), "machine.numa_nodes", "the nodes hold %d of the machine's %d CPUs", len(seen), m.CPUs)
	}
}

var hostWord = regexp.MustCompile(`^[A-Za-z0-9._:%\[\]-]+$`)

func (l *loader) validateHost() {
	h := &l.job.Host
	qemu := l.job.Boot.Method == BootQEMU
	switch {
	case qemu && h.Address != "":
		l.errorf(l.at("host.address"), "host.address", "boot.method qemu connects to its own guest on 127.0.0.1; remove host.address")
	case !qemu && h.Address == "":
		l.missingf("host.address", "missing: the lab machine's name or IP address")
	case h.Address != "" && (!hostWord.MatchString(h.Address) || strings.HasPrefix(h.Address, "-")):
		l.errorf(l.at("host.address"), "host.address", "%q is not a host name or IP address", h.Address)
	}
	l.validateSSH("host", h, qemu)
}

// validateSSH checks how a machine is reached over SSH, its keys under
// prefix (host, build.host).
func (l *loader) validateSSH(prefix string, h *Host, qemu bool) {
	if l.isSet(prefix + ".port") {
		l.intRange(prefix+".port", h.Port, 1, 65535)
	}
	if h.User != "" && (strings.ContainsAny(h.User, " \t@:/") || strings.HasPrefix(h.User, "-")) {
		l.errorf(l.at(prefix+".user"), prefix+".user", "%q is not a user name", h.User)
	}
	if h.Jump != "" {
		if err := checkJump(h.Jump); err != nil {
			l.errorf(l.at(prefix+".jump"), prefix+".jump", "%v", err)
		}
	}
	if h.Identity != "" {
		l.fileExists(prefix+".identity", string(h.Identity), true)
	}
	if h.KnownHosts != "" && !qemu && !h.AcceptNewHostKey {
		l.fileExists(prefix+".known_hosts", string(h.KnownHosts), true)
	}
	l.durationRange(prefix+".connect_timeout", h.ConnectTimeout, time.Second, 10*time.Minute)
	if h.Keepalive != 0 {
		l.durationRange(prefix+".keepalive", h.Keepalive, time.Second, 10*time.Minute)
	}
}

// checkJump checks a bastion written [user@]host[:port].
func checkJump(s string) error {
	rest := s
	if u, h, ok := strings.Cut(s, "@"); ok {
		if u == "" || strings.ContainsAny(u, " \t:/") {
			return fmt.Errorf("%q: write the jump host as [user@]host[:port]", s)
		}
		rest = h
	}
	host, port := rest, ""
	if i := strings.LastIndex(rest, ":"); i >= 0 && !strings.HasSuffix(rest, "]") && strings.Count(rest, ":") == 1 {
		host, port = rest[:i], rest[i+1:]
	}
	if host == "" || !hostWord.MatchString(host) || strings.HasPrefix(host, "-") {
		return fmt.Errorf("%q: write the jump host as [user@]host[:port]", s)
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: port %q is not a port number", s, port)
		}
	}
	return nil
}

// fileExists checks that a named file exists: an error for paths given
// relative to the job file (they live beside it, so a miss is a typo), a
// warning for absolute ones (they may exist only on the machine that runs
// the bisection).
func (l *loader) fileExists(key, path string, machineLocal bool) bool {
	_, err := os.Stat(path)
	if err == nil {
		return true
	}
	why := unwrapPathError(err)
	if l.job.defaulted[key] {
		path += " (the default)"
	}
	if machineLocal {
		l.warnf(l.at(key), key, "%s: %v (fine if this file exists where kbisect runs)", path, why)
		return false
	}
	l.errorf(l.at(key), key, "%s: %v", path, why)
	return false
}

func (l *loader) validateBoot() *BootParams {
	b := &l.job.Boot
	methods := []string{BootKexec, BootGrub, BootScript, BootQEMU}
	if b.Method == "" {
		l.missingf("boot.method", "missing: how test kernels boot (%s)", strings.Join(methods, ", "))
	} else {
		l.oneOf("boot.method", b.Method, methods)
	}
	l.oneOf("boot.on_failure", b.OnFailure, []string{FailureSkip, FailureBad})
	bp := l.validateParams(b.Params)
	for _, p := range SplitCmdline(b.ExtraCmdline) {
		if slices.Contains(IsolationParams, p.Name) {
			l.errorf(l.at("boot.extra_cmdline"), "boot.extra_cmdline", "%s belongs in boot.params, where kbisect reads and verifies the isolation", p.Name)
		}
	}
	l.validateBaseCmdline(b)

	switch init := string(b.Initramfs); {
	case slices.Contains(InitramfsTools, init), strings.ContainsAny(init, " \t/"):
	default:
		msg := fmt.Sprintf("%q is not an initramfs tool (%s) nor a command with arguments", init, strings.Join(InitramfsTools, ", "))
		if c := closest(init, InitramfsTools); c != "" {
			msg += fmt.Sprintf("; did you mean %q?", c)
		}
		l.errorf(l.at("boot.initramfs"), "boot.initramfs", "%s", msg)
	}
	l.durationRange("boot.timeout", b.Timeout, 30*time.Second, 6*time.Hour)
	l.intRange("boot.keep_kernels", b.KeepKernels, 1, 100)
	l.durationRange("boot.settle", b.Settle, 0, time.Hour)

	switch b.Method {
	case BootScript:
		if b.Script == "" {
			l.missingf("boot.script", "missing: boot.method script runs this command to boot the installed kernel (KBISECT_RELEASE names it)")
		}
	default:
		if b.Script != "" {
			l.errorf(l.at("boot.script"), "boot.script", "only boot.method script runs a script (this job boots with %s)", b.Method)
		}
	}
	if b.Method == BootQEMU {
		q := &b.QEMU
		l.oneOf("boot.qemu.accel", q.Accel, Accels)
		l.oneOf("boot.qemu.reboot", q.Reboot, Reboots)
		l.intRange("boot.qemu.cpus", q.CPUs, 1, 256)
		if q.Memory < 256<<20 {
			l.errorf(l.at("boot.qemu.memory"), "boot.qemu.memory", "%s is too little for a kernel and sshd (give at least 256MiB)", q.Memory)
		}
		if l.isSet("machine.cpus") && l.job.Machine.CPUs != q.CPUs {
			l.errorf(l.at("machine.cpus"), "machine.cpus", "the QEMU guest has boot.qemu.cpus: %d CPUs, not %d", q.CPUs, l.job.Machine.CPUs)
		}
		if q.Image != "" {
			l.fileExists("boot.qemu.image", string(q.Image), true)
		}
		if b.PowerCycle != "" {
			l.errorf(l.at("boot.power_cycle"), "boot.power_cycle", "boot.method qemu restarts its guest itself; remove boot.power_cycle")
		}
	} else {
		if l.isSet("boot.qemu") {
			l.errorf(l.at("boot.qemu"), "boot.qemu", "applies to boot.method qemu only (this job boots with %s)", b.Method)
		}
		if b.PowerCycle == "" && b.Method != "" && !l.quietAbout("boot.power_cycle") {
			l.warnf(l.at("boot.power_cycle"), "boot.power_cycle", "not set: a kernel that hangs cannot be recovered without someone at the machine")
		}
	}
	l.checkEnv()
	return bp
}

// validateParams checks boot.params as the kernel will read them, and
// returns them parsed (nil when they do not parse).
func (l *loader) validateParams(params string) *BootParams {
	const key = "boot.params"
	bp, err := ParseBootParams(params, l.job.Machine.CPUs)
	if errs, ok := err.(BootParamErrors); ok {
		for _, be := range errs {
			p := l.at(key)
			if n := l.nodeOf(key); n != nil {
				p = l.valuePos(n, be.Offset)
			}
			l.badf(p, key, "%v", be) // what depends on the CPUs stays quiet
		}
		return nil
	}
	if params == "" && !l.quietAbout(key) {
		l.warnf(l.at(key), key, "empty: test kernels boot without isolation (nohz_full, isolcpus, rcu_nocbs, irqaffinity)")
	}
	seen := map[string]bool{}
	for _, p := range bp.Params {
		switch {
		case !seen[p.Name] || !slices.Contains(IsolationParams, p.Name):
		case slices.Contains(firstWins, p.Name):
			l.warnf(l.at(key), key, "%s is given twice: the kernel keeps the first and refuses a second that differs", p.Name)
		default:
			l.warnf(l.at(key), key, "%s is given twice: the kernel keeps the last", p.Name)
		}
		seen[p.Name] = true
	}
	switch {
	case bp.NohzFull == nil || bp.IsolCPUs == nil || slices.Equal(bp.NohzFull, bp.IsolCPUs):
	case bp.isolcpusHas("nohz"):
		l.errorf(l.at(key), key, "nohz_full (%s) and isolcpus=nohz (%s) differ: the kernel refuses the second (\"nohz_full= must match isolcpus=\")", bp.NohzFull, bp.IsolCPUs)
	default:
		l.warnf(l.at(key), key, "nohz_full (%s) and isolcpus (%s) differ (older kernels refuse that); the isolated CPUs are those in both: %s", bp.NohzFull, bp.IsolCPUs, bp.Isolated())
	}
	return bp
}

// quietAbout reports whether an absent key is better left unmentioned: a
// misspelt key or an include that could not be read probably sets it.
func (l *loader) quietAbout(key string) bool { return l.incomplete || l.meant[key] }

// checkEnv warns about ${NAME}s of commands that are not set here: the
// command would fail, but validate may run where the secrets are not.
func (l *loader) checkEnv() {
	for key, refs := range l.job.envKeys() {
		for _, name := range refs {
			if _, ok := l.opt.LookupEnv(name); !ok {
				l.warnf(l.at(key), key, "${%s} is not set in this environment; kbisect run stops before it starts until it is", name)
			}
		}
	}
}

var makeVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (l *loader) validateBuild() {
	bu := &l.job.Build
	if bu.Tree == "" {
		l.missingf("build.tree", "missing: the kernel git tree to build from")
	} else if fi, err := os.Stat(string(bu.Tree)); err != nil || !fi.IsDir() {
		l.warnf(l.at("build.tree"), "build.tree", "%s is not a directory here (fine if it exists where kbisect runs)", bu.Tree)
	}
	switch {
	case IsMakeConfig(bu.Config):
	case bu.Config == ConfigHost:
		if l.job.Boot.Method == BootQEMU {
			l.errorf(l.at("build.config"), "build.config", "host takes the running config of a lab machine; the QEMU guest runs the previous test kernel (use defconfig or a file)")
		}
	default:
		p, err := l.resolvePath(l.nodeOf("build.config"), bu.Config)
		if err != nil {
			l.errorf(l.at("build.config"), "build.config", "%v", err)
			break
		}
		written := bu.Config
		bu.Config = p
		l.fileExists("build.config", p, filepath.IsAbs(written))
	}
	requested := map[string]string{}
	for i, f := range bu.Fragments {
		key := fmt.Sprintf("build.fragments[%d]", i)
		raw := l.nodeOf(key)
		if !l.fileExists(key, string(f), raw != nil && filepath.IsAbs(raw.Value)) {
			continue
		}
		l.checkFragment(key, string(f))
	}
	for i, o := range bu.Options {
		key := fmt.Sprintf("build.options[%d]", i)
		opt, err := ParseConfigLine(o)
		switch {
		case err != nil:
			l.errorf(l.at(key), key, "%v", err)
		case opt.Name == "":
			l.errorf(l.at(key), key, "a comment is not an option (write CONFIG_NAME=value)")
		case requested[opt.Name] != "" && requested[opt.Name] != opt.Value:
			l.errorf(l.at(key), key, "%s is already requested as %s in build.options", opt.Name, requested[opt.Name])
		default:
			requested[opt.Name] = opt.Value
		}
	}
	for name := range bu.MakeVars {
		key := "build.make_vars." + name
		switch {
		case !makeVarName.MatchString(name):
			l.errorf(l.at(key), key, "%q is not a make variable name", name)
		case name == "O":
			l.errorf(l.at(key), key, "kbisect chooses the output directory (O=) of each build slot")
		}
	}
	l.intRange("build.jobs", bu.Jobs, 0, 4096)
	if bu.CacheSize < 1<<30 {
		l.errorf(l.at("build.cache_size"), "build.cache_size", "%s cannot hold one kernel with its modules (give at least 1GiB)", bu.CacheSize)
	}
	l.durationRange("build.timeout", bu.Timeout, time.Minute, 48*time.Hour)
	l.oneOf("build.on_failure", bu.OnFailure, []string{FailureSkip, FailureBad})
}

// checkFragment reports the lines of a config fragment that are not
// CONFIG_ lines, comments or blank, at the fragment's own file:line:col.
func (l *loader) checkFragment(key, path string) {
	data, err := l.opt.ReadFile(path)
	if err != nil {
		l.errorf(l.at(key), key, "%s: %v", path, unwrapPathError(err))
		return
	}
	display := path
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
			display = rel
		}
	}
	for i, line := range strings.Split(string(data), "\n") {
		if _, err := ParseConfigLine(line); err != nil {
			// The line itself is not repeated: a file named here by
			// mistake may hold secrets.
			col := len(line) - len(strings.TrimLeft(line, " \t")) + 1
			l.errorf(Pos{display, i + 1, col}, "", "%v (in %s)", err, key)
		}
	}
}

// ConfigOption is one line of a kernel config fragment.
type ConfigOption struct {
	Name  string // CONFIG_FOO; empty for a comment or blank line
	Value string // y, m, n, a number or a "string"; n for "is not set"
}

var (
	configLine  = regexp.MustCompile(`^(CONFIG_[A-Za-z0-9_]+)=(.*)$`)
	configName  = regexp.MustCompile(`^CONFIG_[A-Za-z0-9_]+`)
	notSetLine  = regexp.MustCompile(`^# (CONFIG_[A-Za-z0-9_]+) is not set$`)
	configValue = regexp.MustCompile(`^(y|m|n|-?[0-9]+|0x[0-9a-fA-F]+|"([^"\\]|\\.)*")$`)
)

// ParseConfigLine parses one line of a kernel config fragment, the way
// scripts/kconfig/merge_config.sh reads them.
func ParseConfigLine(line string) (ConfigOption, error) {
	s := strings.TrimSpace(line)
	if m := notSetLine.FindStringSubmatch(s); m != nil {
		return ConfigOption{Name: m[1], Value: "n"}, nil
	}
	if s == "" || strings.HasPrefix(s, "#") {
		return ConfigOption{}, nil
	}
	m := configLine.FindStringSubmatch(s)
	if m == nil {
		if !strings.HasPrefix(s, "CONFIG_") {
			return ConfigOption{}, fmt.Errorf("not a config option (write CONFIG_NAME=y, =m, =n, a number or a \"string\")")
		}
		name := configName.FindString(s)
		return ConfigOption{}, fmt.Errorf("%s is not NAME=value (write e.g. %s=y)", name, name)
	}
	if !configValue.MatchString(m[2]) {
		return ConfigOption{}, fmt.Errorf("%s: the value must be y, m, n, a number or a \"quoted string\"", m[1])
	}
	return ConfigOption{Name: m[1], Value: m[2]}, nil
}

// loaderWords are what a boot loader adds to a command line by itself:
// never part of a base command line, never asked of a booted kernel.
var loaderWords = []string{"BOOT_IMAGE", "initrd"}

// LoaderWords returns the names of the parameters a boot loader adds to a
// kernel's command line by itself (grub's BOOT_IMAGE, an initrd=).
func LoaderWords() []string { return slices.Clone(loaderWords) }

// validateBaseCmdline checks boot.base_cmdline: the machine's own
// parameters (root=, console=, …), without what the job sets itself.
func (l *loader) validateBaseCmdline(b *Boot) {
	const key = "boot.base_cmdline"
	if b.BaseCmdline == "" {
		return
	}
	if b.Method == BootQEMU {
		l.errorf(l.at(key), key, "boot.method qemu boots its guest with kbisect's own command line (console, root, init); put other parameters in boot.extra_cmdline")
		return
	}
	for _, p := range SplitCmdline(b.BaseCmdline) {
		at := l.at(key)
		if n := l.nodeOf(key); n != nil {
			at = l.valuePos(n, p.Offset)
		}
		switch {
		case slices.Contains(IsolationParams, p.Name):
			l.errorf(at, key, "%s belongs in boot.params, where kbisect reads and verifies the isolation", p.Name)
		case slices.Contains(loaderWords, p.Name):
			l.errorf(at, key, "%s is what the boot loader adds; leave it out", p.Name)
		}
	}
}
