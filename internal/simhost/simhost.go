// Package simhost is an emulated kernel host: an in-process SSH server
// (golang.org/x/crypto/ssh) that speaks the real protocol and answers the
// operations kbisect sends (facts, install, kexec, copies, the osnoise
// tracer) as a lab machine would, including the ways machines fail: a
// kernel that never comes back until power-cycled, one that boots the
// wrong release, one that boots without the isolation parameters, a
// connection that drops in the middle of a measurement, a host that
// refuses or drops connections for a while. A kernel's noise comes from
// its image: the KBISECT_SIM_NOISE_US=<n> string the simulated tree
// compiles into it (see osnoise.go). It is the host of the simulated lab
// (internal/simlab).
package simhost

import (
	"archive/tar"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"kbisect/configs"
)

// Fault is what goes wrong when a kernel boots.
type Fault int

// Faults.
const (
	FaultNone         Fault = iota
	FaultNeverBack          // hangs until power-cycled, then the default kernel runs
	FaultWrongRelease       // another kernel than the one asked for comes back
	FaultNoIsolation        // boots, but without the isolation parameters
	FaultPanicReboot        // panics and reboots (panic=N) into the default kernel
)

// WrongRelease is the kernel FaultWrongRelease boots instead.
const WrongRelease = "6.1.0-0.unexpected"

// Kernel is what runs: uname -r, uname -v and /proc/cmdline, and the
// kernel's config as /proc/config.gz gives it (empty: the kernel has
// none, as a kernel kbisect boots here has none). Noise is its noise
// level on isolated CPUs, the longest single noise a period typically
// sees (0: DefaultNoise); a booted kernel takes the level its image
// carries.
type Kernel struct {
	Release, Version, Cmdline string
	Config                    string
	Noise                     time.Duration
}

// Host is an emulated lab machine listening on 127.0.0.1.
type Host struct {
	Port           int
	KnownHostsLine string // the known_hosts line of its host key
	Identity       string // a private key file it accepts
	// PowerCycleCommand is a command that power-cycles it (run by the
	// client as the job's boot.power_cycle).
	PowerCycleCommand string

	mu        sync.Mutex
	sudoPass  bool // sudo -n fails as it does without NOPASSWD
	running   Kernel
	def       Kernel
	bootID    string
	down      bool
	installed map[string]bool
	faults    map[string]Fault
	conns     map[net.Conn]bool
	boots     []string
	files     map[string]string // copied files: path → sha256
	l         net.Listener
	cycle     string
	done      chan struct{}
	closeOnce sync.Once

	cpus     int                      // the machine's CPUs
	levels   map[string]time.Duration // release → noise level its image carries
	seed     uint64
	floor    time.Duration
	measured int          // osnoise answers so far
	dropAt   map[int]bool // osnoise answers (by number) that lose their connection
	refuse   int          // connections still to close before the handshake
	dropNext int          // connections still to drop at their first session
	uptime   float64      // seconds the running kernel has been up, as its trace clock says
}

// Start starts an emulated host running def; it stops with the test.
func Start(t testing.TB, def Kernel) *Host {
	t.Helper()
	h, err := New(t.TempDir(), def)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// New starts an emulated host running def, listening on 127.0.0.1; its
// identity file and power-cycle flag live in dir, which must exist. It
// runs until Close.
func New(dir string, def Kernel) (*Host, error) {
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("simhost: host key: %v", err)
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		return nil, fmt.Errorf("simhost: host key: %v", err)
	}
	userPub, userPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("simhost: user key: %v", err)
	}
	pemBlock, err := ssh.MarshalPrivateKey(userPriv, "")
	if err != nil {
		return nil, fmt.Errorf("simhost: user key: %v", err)
	}
	h := &Host{running: def, def: def, bootID: newID(), installed: map[string]bool{}, faults: map[string]Fault{},
		conns: map[net.Conn]bool{}, files: map[string]string{}, cycle: filepath.Join(dir, "power-cycle"),
		done: make(chan struct{}), cpus: DefaultCPUs, levels: map[string]time.Duration{}, seed: 1,
		dropAt: map[int]bool{}, uptime: bootUptime}
	h.Identity = filepath.Join(dir, "id")
	if err := os.WriteFile(h.Identity, pem.EncodeToMemory(pemBlock), 0o600); err != nil {
		return nil, fmt.Errorf("simhost: %v", err)
	}
	authorized, err := ssh.NewPublicKey(userPub)
	if err != nil {
		return nil, fmt.Errorf("simhost: user key: %v", err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
		if string(key.Marshal()) == string(authorized.Marshal()) {
			return nil, nil
		}
		return nil, fmt.Errorf("unknown key")
	}}
	cfg.AddHostKey(hostSigner)
	if h.l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("simhost: %v", err)
	}
	h.Port = h.l.Addr().(*net.TCPAddr).Port
	h.KnownHostsLine = knownhosts.Line([]string{knownhosts.Normalize(fmt.Sprintf("127.0.0.1:%d", h.Port))}, hostSigner.PublicKey())
	h.PowerCycleCommand = "touch '" + strings.ReplaceAll(h.cycle, "'", `'\''`) + "'"
	go h.serve(cfg)
	go h.watchPowerCycle(h.done)
	return h, nil
}

// Close stops the host: it stops listening and drops every connection.
// Closing twice is harmless.
func (h *Host) Close() error {
	var err error
	h.closeOnce.Do(func() {
		close(h.done)
		err = h.l.Close()
		h.dropAll()
	})
	return err
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// SetFault says what happens when release boots.
func (h *Host) SetFault(release string, f Fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults[release] = f
}

// SudoNeedsPassword makes sudo -n fail as it does without NOPASSWD.
func (h *Host) SudoNeedsPassword() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sudoPass = true
}

// Running returns the kernel that runs now.
func (h *Host) Running() Kernel {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.running
}

// Boots returns the releases booted so far, power cycles included.
func (h *Host) Boots() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.boots...)
}

// SetCPUs says how many CPUs the machine has (DefaultCPUs unless set):
// the osnoise tracer refuses others.
func (h *Host) SetCPUs(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cpus = n
}

// SetSeed seeds the noise: the same seed gives the same measurements in
// the same order.
func (h *Host) SetSeed(seed uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seed = seed
}

// SetFloor sets the machine's own noise: no kernel runs quieter than it
// (0: none). A firmware update, an SMI storm or a noisy neighbour drifts
// a machine that way, whatever kernel it boots.
func (h *Host) SetFloor(level time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.floor = level
}

// Noise returns the noise level the image copied for release carries,
// and whether one did.
func (h *Host) Noise(release string) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.levels[release]
	return l, ok
}

// Measurements returns how many osnoise runs the host answered (dropped
// ones included).
func (h *Host) Measurements() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.measured
}

// DropMeasurement makes the nth osnoise run from now (1: the next) lose
// its connection halfway through the trace, as a host whose network
// fails during a measurement.
func (h *Host) DropMeasurement(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n > 0 {
		h.dropAt[h.measured+n] = true
	}
}

// RefuseConnections closes the next n connections before the SSH
// handshake, as a host whose sshd is not up yet.
func (h *Host) RefuseConnections(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refuse = max(n, 0)
}

// DropConnections drops the next n connections once they are
// authenticated, when they open their first session: the dial works, the
// first command fails.
func (h *Host) DropConnections(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropNext = max(n, 0)
}

// Installed reports whether release was installed.
func (h *Host) Installed(release string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.installed[release]
}

func (h *Host) serve(cfg *ssh.ServerConfig) {
	for {
		c, err := h.l.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		down, refuse, drop := h.down, h.refuse > 0, false
		switch {
		case refuse:
			h.refuse--
		case !down:
			h.conns[c] = true
			if h.dropNext > 0 {
				h.dropNext--
				drop = true
			}
		}
		h.mu.Unlock()
		if down || refuse {
			c.Close() // booting, or flaky: nothing answers
			continue
		}
		go h.handle(c, cfg, drop)
	}
}

// handle serves one connection; drop closes it when its first session
// opens.
func (h *Host) handle(c net.Conn, cfg *ssh.ServerConfig, drop bool) {
	defer func() {
		h.mu.Lock()
		delete(h.conns, c)
		h.mu.Unlock()
		c.Close()
	}()
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		if drop {
			return
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			return
		}
		go h.session(c, ch, chReqs)
	}
}

// session answers one session of connection c.
func (h *Host) session(c net.Conn, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	started := false
	for {
		select {
		case <-done:
			return
		case req, ok := <-reqs:
			if !ok {
				return
			}
			switch {
			case req.Type == "signal":
				cancel() // a signal ends what runs, as SIGTERM would
				_ = req.Reply(true, nil)
			case req.Type != "exec" || started:
				_ = req.Reply(req.Type == "env", nil)
			default:
				var p struct{ Command string }
				if err := ssh.Unmarshal(req.Payload, &p); err != nil {
					_ = req.Reply(false, nil)
					return
				}
				_ = req.Reply(true, nil)
				started = true
				go func() {
					defer close(done)
					code := h.exec(ctx, c, p.Command, ch, ch, ch.Stderr())
					_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
				}()
			}
		}
	}
}

var (
	cmdlineArg = regexp.MustCompile(`(?m)^KBISECT_CMDLINE='((?:[^']|'\\'')*)'`)
	exportLine = regexp.MustCompile(`(?m)^export ([A-Za-z_][A-Za-z0-9_]*)=(.*)$`)
)

// exec answers one remote command of connection c as a lab host would.
func (h *Host) exec(ctx context.Context, c net.Conn, command string, stdin io.Reader, stdout, stderr io.Writer) int {
	if strings.HasPrefix(command, "sh -c ") && strings.Contains(command, "tar -xf -") {
		return h.untar(command, stdin, stdout, stderr)
	}
	h.mu.Lock()
	sudoPass := h.sudoPass
	h.mu.Unlock()
	if strings.HasPrefix(command, "sudo -n ") && sudoPass {
		fmt.Fprintln(stderr, "sudo: a password is required")
		return 1
	}
	if command != "sh -s" && command != "sudo -n sh -s" {
		return h.shell(ctx, command, stdout, stderr)
	}
	data, _ := io.ReadAll(stdin)
	script := string(data)
	env := map[string]string{}
	for _, m := range exportLine.FindAllStringSubmatch(script, -1) {
		env[m[1]] = strings.Trim(m[2], "'")
	}
	op := ""
	for _, line := range strings.Split(script, "\n") {
		if rest, ok := strings.CutPrefix(line, "# kbisect:"); ok {
			op = rest
			break
		}
	}
	name, arg, _ := strings.Cut(op, " ")
	switch name {
	case "facts":
		h.mu.Lock()
		k, id := h.running, h.bootID
		h.mu.Unlock()
		iso, nohz := isolation(k.Cmdline)
		fmt.Fprintf(stdout, "%s\n%s\n%s\n%s\n%s\n%s\n", k.Release, k.Version, id, k.Cmdline, iso, nohz)
		return 0
	case "config":
		k := h.Running()
		if k.Config == "" {
			fmt.Fprintf(stderr, "the running kernel %s has neither /proc/config.gz (CONFIG_IKCONFIG_PROC) nor /boot/config-%s\n", k.Release, k.Release)
			return 3
		}
		fmt.Fprintf(stdout, "%s\n%s", k.Release, k.Config)
		return 0
	case "install":
		h.mu.Lock()
		h.installed[arg] = true
		h.mu.Unlock()
		return 0
	case "kexec", "grub":
		m := cmdlineArg.FindStringSubmatch(script)
		if !h.Installed(arg) || m == nil {
			fmt.Fprintf(stderr, "kexec: cannot open /boot/vmlinuz-%s\n", arg)
			return 1
		}
		cmdline := strings.ReplaceAll(m[1], `'\''`, "'")
		go h.reboot(Kernel{Release: arg, Version: "#1 SMP PREEMPT_RT " + time.Now().Format("Mon Jan 2 15:04:05 MST 2006"), Cmdline: cmdline, Noise: h.level(arg)})
		return 0
	case "script":
		rel := env["KBISECT_RELEASE"]
		go h.reboot(Kernel{Release: rel, Version: "#1 SMP PREEMPT_RT", Cmdline: h.Running().Cmdline, Noise: h.level(rel)})
		return 0
	case "osnoise":
		return h.osnoise(script, c, stdout, stderr)
	}
	return h.shell(ctx, script, stdout, stderr)
}

// shell runs any other script with this machine's sh: the emulated host's
// user space is the test machine's.
func (h *Host) shell(ctx context.Context, script string, stdout, stderr io.Writer) int {
	c := exec.CommandContext(ctx, "/bin/sh", "-s")
	c.Stdin, c.Stdout, c.Stderr = strings.NewReader(script), stdout, stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGTERM) }
	c.WaitDelay = 2 * time.Second
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode()
	case errors.As(err, &ee):
		return 143 // killed by the signal
	}
	fmt.Fprintf(stderr, "simhost: %v\n", err)
	return 126
}

// isolation is what /sys/devices/system/cpu/isolated and nohz_full say for
// a command line.
func isolation(cmdline string) (string, string) {
	bp, err := configs.ParseBootParams(cmdline, 0)
	if err != nil {
		return "", ""
	}
	return bp.Domain().String(), bp.Tickless().String()
}

// level is the noise level of release: what its image carried, else the
// default kernel's.
func (h *Host) level(release string) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l, ok := h.levels[release]; ok {
		return l
	}
	return h.def.Noise
}

// stageDir is where remote.Install copies a kernel image before
// installing it: /var/tmp/kbisect-stage/<release>.
var stageDir = regexp.MustCompile(`/var/tmp/kbisect-stage/([A-Za-z0-9._+~-]+)`)

// untar takes a copy: it reads the tar stream and answers sha256sum's
// lines for what arrived. An image staged for a release that carries a
// noise level sets that release's level.
func (h *Host) untar(command string, stdin io.Reader, stdout, stderr io.Writer) int {
	release := ""
	if m := stageDir.FindStringSubmatch(command); m != nil {
		release = m[1]
	}
	tr := tar.NewReader(stdin)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Fprintf(stderr, "tar: %v\n", err)
			return 2
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		sum := sha256.New()
		var marker levelScanner
		if _, err := io.Copy(io.MultiWriter(sum, &marker), tr); err != nil {
			fmt.Fprintf(stderr, "tar: %v\n", err)
			return 2
		}
		line := hex.EncodeToString(sum.Sum(nil))
		h.mu.Lock()
		h.files[hdr.Name] = line
		if l, ok := marker.level(); ok && release != "" {
			h.levels[release] = l
		}
		h.mu.Unlock()
		fmt.Fprintf(stdout, "%s  ./%s\n", line, hdr.Name)
	}
	return 0
}

// reboot drops every connection and boots k, as the fault for its
// release says.
func (h *Host) reboot(k Kernel) {
	time.Sleep(100 * time.Millisecond) // the command's answer gets out first
	h.mu.Lock()
	fault := h.faults[k.Release]
	h.down = true
	h.mu.Unlock()
	h.dropAll()
	time.Sleep(300 * time.Millisecond)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bootID, h.uptime = newID(), bootUptime
	switch fault {
	case FaultNeverBack:
		h.boots = append(h.boots, k.Release+" (hung)")
		return // stays down until the power cycle
	case FaultWrongRelease:
		k = Kernel{Release: WrongRelease, Version: h.def.Version, Cmdline: h.def.Cmdline, Noise: h.def.Noise}
	case FaultPanicReboot:
		k = h.def
	case FaultNoIsolation:
		var keep []string
		for _, w := range strings.Fields(k.Cmdline) {
			name, _, _ := strings.Cut(w, "=")
			if !slicesContains(configs.IsolationParams, name) {
				keep = append(keep, w)
			}
		}
		k.Cmdline = strings.Join(keep, " ")
	}
	h.running = k
	h.boots = append(h.boots, k.Release)
	h.down = false
}

func slicesContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (h *Host) dropAll() {
	h.mu.Lock()
	conns := h.conns
	h.conns = map[net.Conn]bool{}
	h.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// watchPowerCycle does what a BMC does when PowerCycleCommand runs: the
// host goes down and comes back on its default kernel.
func (h *Host) watchPowerCycle(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := os.Stat(h.cycle); err != nil {
			continue
		}
		os.Remove(h.cycle)
		h.mu.Lock()
		h.down = true
		h.mu.Unlock()
		h.dropAll()
		time.Sleep(300 * time.Millisecond)
		h.mu.Lock()
		h.bootID, h.running, h.down, h.uptime = newID(), h.def, false, bootUptime
		h.boots = append(h.boots, h.def.Release+" (power cycle)")
		h.mu.Unlock()
	}
}
