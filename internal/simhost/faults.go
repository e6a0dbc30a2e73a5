package simhost

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"hash/fnv"
	"net"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// The faults of a lab beyond one kernel's boot, as kbisect's soak test
// injects them: a share of the kernels failing at boot, a host that hangs
// in the middle of a measurement, a connection lost in the middle of a
// command, a host key that changes, a clock that jumps.

// labFaults are the faults armed on a host; h.mu guards them.
type labFaults struct {
	bootFault  Fault
	bootShare  float64
	hangAt     int // the osnoise run (by number) that hangs the host
	runsOfBoot int // osnoise runs since the running kernel booted
	jumpAt     int // the osnoise run before which the clock jumps
	jump       time.Duration
	dropCmd    int // the command (by number) whose connection drops
	commands   int // commands answered so far
	keyAtBoot  int // the boot (by number) after which the host key is another
	boots      int // boots so far, power cycles included
	keyChanged bool

	// stalled is closed when a hang ends (nil: no hang). Its own lock:
	// the host writes to its connections with h.mu held.
	stallMu sync.Mutex
	stalled chan struct{}
}

// SetBootFaultShare makes a share (0 to 1) of the kernels booted fail as
// f does, each of them every time it boots: the kernels whose release
// hashes, with the host's seed, below the share. The host's default
// kernel never does, and a release given its own fault (SetFault) keeps
// that one.
func (h *Host) SetBootFaultShare(f Fault, share float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lab.bootFault, h.lab.bootShare = f, share
}

// faultOf is what happens when release boots. h.mu is held.
func (h *Host) faultOf(release string) Fault {
	if f, ok := h.faults[release]; ok {
		return f
	}
	if h.lab.bootShare <= 0 || release == h.def.Release {
		return FaultNone
	}
	s := fnv.New64a()
	fmt.Fprintf(s, "%d %s", h.seed, release)
	if float64(s.Sum64()%10000)/10000 < h.lab.bootShare {
		return h.lab.bootFault
	}
	return FaultNone
}

// HangMeasurement makes the nth osnoise run from now (1: the next) hang
// the whole machine in its middle, as a kernel that locks up: the
// connections stay open and nothing more comes through them (keepalives
// go unanswered), new ones are not answered, until the power cycle
// brings the default kernel back.
func (h *Host) HangMeasurement(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n > 0 {
		h.lab.hangAt = h.measured + n
	}
}

// JumpClock makes the host's clock (the trace clock its osnoise trace
// stamps, the uptime) jump by d before the nth osnoise run from now, as
// a clock stepped by NTP or a broken TSC; it never goes below zero.
func (h *Host) JumpClock(n int, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n > 0 {
		h.lab.jumpAt, h.lab.jump = h.measured+n, d
	}
}

// measurementFaults applies the faults armed for osnoise run n and says
// whether it hangs the host. h.mu is held.
func (l *labFaults) measurementFaults(h *Host, n int) bool {
	if n == l.jumpAt {
		h.uptime = max(h.uptime+l.jump.Seconds(), 0)
	}
	l.runsOfBoot++
	if n != l.hangAt && (h.faultOf(h.running.Release) != FaultHangsMeasuring || l.runsOfBoot != 2) {
		return false
	}
	l.stallMu.Lock()
	l.stalled = make(chan struct{})
	l.stallMu.Unlock()
	h.down = true
	h.boots = append(h.boots, h.running.Release+" (hung)")
	return true
}

// waitStall waits while the host hangs (until its power cycle, or Close).
func (h *Host) waitStall() {
	h.lab.stallMu.Lock()
	ch := h.lab.stalled
	h.lab.stallMu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-h.done:
	}
}

// endStall ends a hang, after the power cycle dropped the connections it
// held.
func (h *Host) endStall() {
	h.lab.stallMu.Lock()
	defer h.lab.stallMu.Unlock()
	if h.lab.stalled != nil {
		close(h.lab.stalled)
		h.lab.stalled = nil
	}
}

// stallConn is a connection of a host that may hang: while it does,
// nothing read from the client reaches the server and nothing the server
// writes leaves.
type stallConn struct {
	net.Conn
	h *Host
}

func (c *stallConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.h.stalling() {
		c.h.waitStall()
		return 0, net.ErrClosed
	}
	return n, err
}

func (c *stallConn) Write(p []byte) (int, error) {
	if c.h.stalling() {
		c.h.waitStall()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

func (h *Host) stalling() bool {
	h.lab.stallMu.Lock()
	defer h.lab.stallMu.Unlock()
	return h.lab.stalled != nil
}

// DropCommand makes the nth command from now (1: the next; any command:
// a script, a copy) lose its connection once it has run, before its exit
// status is sent: what it did is done, and the client never hears so.
func (h *Host) DropCommand(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n > 0 {
		h.lab.dropCmd = h.lab.commands + n
	}
}

// dropsCommand counts a command that ran and says whether its
// connection drops.
func (h *Host) dropsCommand() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lab.commands++
	return h.lab.commands == h.lab.dropCmd
}

// ChangeHostKeyAfterBoot makes the host answer with a new host key from
// the nth boot from now on (1: the next; power cycles count), as a
// machine reinstalled or replaced behind the same address. The key is
// not saved: a host started again (Resume) has its own key back.
func (h *Host) ChangeHostKeyAfterBoot(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n > 0 {
		h.lab.keyAtBoot = h.lab.boots + n
	}
}

// HostKeyChanged reports whether the host answers with another key than
// its known_hosts line's.
func (h *Host) HostKeyChanged() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lab.keyChanged
}

// ChangeHostKey makes the host answer with a new host key from now on
// (not saved, as ChangeHostKeyAfterBoot).
func (h *Host) ChangeHostKey() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changeHostKey()
}

// bootedAgain counts a boot and changes the host key when it is time.
// h.mu is held.
func (h *Host) bootedAgain() {
	h.lab.boots++
	if h.lab.boots == h.lab.keyAtBoot {
		_ = h.changeHostKey() // no entropy: the key stays, and HostKeyChanged says so
	}
}

// changeHostKey gives the host a new host key. h.mu is held.
func (h *Host) changeHostKey() error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("simhost: host key: %v", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return fmt.Errorf("simhost: host key: %v", err)
	}
	h.cfg, h.lab.keyChanged = h.serverConfig(signer), true
	return nil
}

// serverConfig is the SSH server's configuration with host key key,
// accepting the client's identity.
func (h *Host) serverConfig(key ssh.Signer) *ssh.ServerConfig {
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) == string(h.authorized.Marshal()) {
			return nil, nil
		}
		return nil, fmt.Errorf("unknown key")
	}}
	cfg.AddHostKey(key)
	return cfg
}

// BootFault is what happens when release boots.
func (h *Host) BootFault(release string) Fault {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.faultOf(release)
}
