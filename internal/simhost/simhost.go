// Package simhost is an emulated kernel host: an in-process SSH server
// (golang.org/x/crypto/ssh) that speaks the real protocol and answers the
// operations kbisect sends (facts, install, kexec, copies, the osnoise
// tracer) as a lab machine would, including the ways machines fail: a
// kernel that never comes back until power-cycled, one that boots the
// wrong release, one that boots without the isolation parameters or with
// the command line of the kernel before (a boot loader ignoring kbisect), a
// connection that drops in the middle of a measurement, a host that
// refuses or drops connections for a while. A kernel's noise comes from
// its image: the KBISECT_SIM_NOISE_US=<n> string the simulated tree
// compiles into it (see osnoise.go), and scatters as real machines' does
// when the host has a model (SetNoiseModel). It is the host of the
// simulated lab (internal/simlab).
//
// It may import configs (boot parameters, to answer what a kernel
// isolates) and the internal packages, no other kbisect package: it
// answers remote's scripts and noise's tracer as a real machine would,
// from the outside. Only tests, the demo and simulate may import it.
package simhost

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"kbisect/internal/simnoise"
)

// Fault is what goes wrong when a kernel boots.
type Fault int

// Faults.
const (
	FaultNone           Fault = iota
	FaultNeverBack            // hangs until power-cycled, then the default kernel runs
	FaultWrongRelease         // another kernel than the one asked for comes back
	FaultNoIsolation          // boots, but without the isolation parameters
	FaultPanicReboot          // panics and reboots (panic=N) into the default kernel
	FaultStaleCmdline         // boots with the command line the kernel before had, not the one asked for
	FaultKexecRejected        // kexec_load refuses the image: Invalid argument
	FaultKexecNoMemory        // kexec_load fails for the host: Cannot allocate memory
	FaultHangsMeasuring       // boots, then hangs the whole host in its second osnoise run of every boot (a sample in)
)

// The exit codes of remote's kexec script when kexec -l fails: the image
// refused, or the load failed for the host.
const (
	exitKexecRejected = 80
	exitKexecLab      = 81
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

	mu         sync.Mutex
	sudoPass   bool // sudo -n fails as it does without NOPASSWD
	running    Kernel
	def        Kernel
	bootID     string
	down       bool
	installed  map[string]bool
	ownRecord  *Kernel // what the host recorded of its own kernel's command line
	faults     map[string]Fault
	conns      map[net.Conn]bool
	boots      []string
	files      map[string]string // copied files: path → sha256
	l          net.Listener
	cfg        *ssh.ServerConfig // what serves the next connection (its host key)
	authorized ssh.PublicKey     // the client key it accepts
	cycle      string
	done       chan struct{}
	closeOnce  sync.Once

	cpus     int                      // the machine's CPUs
	levels   map[string]time.Duration // release → noise level its image carries
	seed     uint64
	floor    time.Duration
	noStorm  bool         // isolated CPUs stay quiet at any level (SetNoStorm)
	measured int          // osnoise answers so far
	dropAt   map[int]bool // osnoise answers (by number) that lose their connection
	refuse   int          // connections still to close before the handshake
	dropNext int          // connections still to drop at their first session
	uptime   float64      // seconds the running kernel has been up, as its trace clock says

	lab labFaults // the lab's faults beyond a kernel's boot (faults.go)

	noise       NoiseModel     // the noise real machines have (zero: osnoise.go's own)
	noiseBoot   *simnoise.Boot // the model's draw for the boot noiseBootID
	noiseBootID string
	noiseBoots  int // boots drawn so far
	// noiseRun is the model's run over the host's boots, in order (its
	// drift and its AR(1) of boot levels).
	noiseRun *simnoise.Run
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
// identity file, its own keys and port, and its power-cycle flag live in
// dir, which must exist. It runs until Close.
func New(dir string, def Kernel) (*Host, error) {
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("simhost: host key: %v", err)
	}
	_, userPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("simhost: user key: %v", err)
	}
	for path, key := range map[string]ed25519.PrivateKey{filepath.Join(dir, hostKeyFile): hostPriv, filepath.Join(dir, "id"): userPriv} {
		block, err := ssh.MarshalPrivateKey(key, "")
		if err != nil {
			return nil, fmt.Errorf("simhost: %v", err)
		}
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			return nil, fmt.Errorf("simhost: %v", err)
		}
	}
	h, err := start(dir, def, 0)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, portFile), []byte(strconv.Itoa(h.Port)+"\n"), 0o644); err != nil {
		h.Close()
		return nil, fmt.Errorf("simhost: %v", err)
	}
	return h, nil
}

// Files of a host's identity in its directory, besides the client's id.
const (
	hostKeyFile = "host_key"
	portFile    = "port"
)

// Resume starts again the host New started in dir: the same host key,
// client identity and port, so known_hosts and job files written for it
// hold. It runs def, as a machine does after a power cycle.
func Resume(dir string, def Kernel) (*Host, error) {
	b, err := os.ReadFile(filepath.Join(dir, portFile))
	if err != nil {
		return nil, fmt.Errorf("simhost: %s holds no host to resume: %v", dir, err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || port <= 0 || port > 65535 {
		return nil, fmt.Errorf("simhost: %s: %q is not a port", filepath.Join(dir, portFile), strings.TrimSpace(string(b)))
	}
	return start(dir, def, port)
}

// start serves the host whose keys are in dir on port (0: any).
func start(dir string, def Kernel, port int) (*Host, error) {
	hostSigner, err := readKey(filepath.Join(dir, hostKeyFile))
	if err != nil {
		return nil, err
	}
	h := &Host{running: def, def: def, bootID: newID(), installed: map[string]bool{}, faults: map[string]Fault{},
		conns: map[net.Conn]bool{}, files: map[string]string{}, cycle: filepath.Join(dir, "power-cycle"),
		done: make(chan struct{}), cpus: DefaultCPUs, levels: map[string]time.Duration{}, seed: 1,
		dropAt: map[int]bool{}, uptime: bootUptime}
	os.Remove(h.cycle + ".gone") // a machine started again is back
	h.Identity = filepath.Join(dir, "id")
	user, err := readKey(h.Identity)
	if err != nil {
		return nil, err
	}
	h.authorized = user.PublicKey()
	h.cfg = h.serverConfig(hostSigner)
	if h.l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
		if port != 0 {
			return nil, fmt.Errorf("simhost: the host in %s listened on 127.0.0.1:%d, and cannot again (%v): free the port, or make a new lab", dir, port, err)
		}
		return nil, fmt.Errorf("simhost: %v", err)
	}
	h.Port = h.l.Addr().(*net.TCPAddr).Port
	h.KnownHostsLine = knownhosts.Line([]string{knownhosts.Normalize(fmt.Sprintf("127.0.0.1:%d", h.Port))}, hostSigner.PublicKey())
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	// The power controller of a machine that is gone (Kill) fails too.
	h.PowerCycleCommand = "test ! -e " + q(h.cycle+".gone") + " && touch " + q(h.cycle)
	go h.serve()
	go h.watchPowerCycle(h.done)
	return h, nil
}

func readKey(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("simhost: %v", err)
	}
	k, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("simhost: %s: %v", path, err)
	}
	return k, nil
}

// Kill makes the machine gone for good: it stops answering, and its
// power controller fails (PowerCycleCommand exits 1), as when a server
// loses its power supply.
func (h *Host) Kill() error {
	if err := os.WriteFile(h.cycle+".gone", nil, 0o644); err != nil {
		return fmt.Errorf("simhost: %v", err)
	}
	return h.Close()
}

// Cycle power-cycles the host, as its PowerCycleCommand does.
func (h *Host) Cycle() error {
	if err := os.WriteFile(h.cycle, nil, 0o644); err != nil {
		return fmt.Errorf("simhost: %v", err)
	}
	return nil
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

// SetNoStorm keeps the isolated CPUs quiet whatever the level (false:
// from StormLevel up they take the interrupt storm, as before): a kernel
// at 15 µs then differs from one at 7 µs by its longest single noise
// only, as two kernels below StormLevel do. It applies from the next
// measurement on.
func (h *Host) SetNoStorm(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.noStorm = on
}

// NoStorm reports whether the host never storms (SetNoStorm).
func (h *Host) NoStorm() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.noStorm
}

// stormLevel is the level from which the isolated CPUs storm: StormLevel,
// or never with SetNoStorm. h.mu is held.
func (h *Host) stormLevel() time.Duration {
	if h.noStorm {
		return math.MaxInt64
	}
	return StormLevel
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
