// Package sshtest starts a real OpenSSH sshd on 127.0.0.1 with throwaway
// keys, for the tests of everything that talks to lab hosts. It imports
// no kbisect package, and only tests import it.
package sshtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is a real OpenSSH sshd on 127.0.0.1 with throwaway keys.
type Server struct {
	Dir        string
	Port       int
	User       string
	Identity   string // a key the server accepts
	KnownHosts string // holds the server's host key
	HostLine   string // that known_hosts line
	// Received, on a recording server, is the file that keeps what every
	// session brought: its command, its environment and its standard
	// input.
	Received string
	cmd      *exec.Cmd
}

// Start starts sshd for the test, with extra lines for its sshd_config
// (e.g. "SetEnv PATH=/usr/bin:/bin": a host whose sessions lack what
// /usr/sbin holds). Without sshd the real-SSH tests say so by name and
// skip; CI sets KBISECT_REQUIRE_SSHD, where a missing sshd fails.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return start(t, false, extra...)
}

// StartRecording starts sshd for the test as Start does (extra too), and keeps in
// s.Received what every session brought to the host (its command, the
// environment it runs with, and all of its standard input) before the
// command runs as usual: what a test must prove never reached a host.
func StartRecording(t testing.TB, extra ...string) *Server {
	t.Helper()
	return start(t, true, extra...)
}

// recorder runs as sshd's ForceCommand: it appends the session's command,
// environment and standard input to the record, then runs the command
// with that input.
const recorder = `#!/bin/sh
rec=%s
{ printf '== command: %%s\n== env:\n' "$SSH_ORIGINAL_COMMAND"; env; printf '== stdin:\n'; } >>"$rec"
tee -a "$rec" | /bin/sh -c "$SSH_ORIGINAL_COMMAND"
`

func start(t testing.TB, record bool, extra ...string) *Server {
	t.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		sshd = "/usr/sbin/sshd"
	}
	if _, err := os.Stat(sshd); err != nil {
		if os.Getenv("KBISECT_REQUIRE_SSHD") != "" {
			t.Fatalf("sshd is missing: %v", err)
		}
		t.Skip("real-sshd test skipped: sshd is not installed (apt-get install openssh-server)")
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Dir: t.TempDir(), User: me.Username}
	keygen := func(name string) string {
		p := filepath.Join(s.Dir, name)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", p).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
		return p
	}
	hostKey := keygen("host_key")
	// A second host key, which known_hosts does not list (as on a stock
	// Debian host known by its ed25519 key): clients must ask for the key
	// they know.
	ecdsaKey := filepath.Join(s.Dir, "host_ecdsa_key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ecdsa", "-N", "", "-f", ecdsaKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	s.Identity = keygen("user_key")
	pub, err := os.ReadFile(s.Identity + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "authorized_keys"), pub, 0o600); err != nil {
		t.Fatal(err)
	}
	s.Port = FreePort(t)
	hostPub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(hostPub))
	s.HostLine = fmt.Sprintf("[127.0.0.1]:%d %s %s", s.Port, f[0], f[1])
	s.KnownHosts = filepath.Join(s.Dir, "known_hosts")
	if err := os.WriteFile(s.KnownHosts, []byte(s.HostLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(s.Dir, "sshd_config")
	config := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
HostKey %s
PidFile %s
AuthorizedKeysFile %s
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
LogLevel ERROR
%s
`, s.Port, ecdsaKey, hostKey, filepath.Join(s.Dir, "sshd.pid"), filepath.Join(s.Dir, "authorized_keys"), strings.Join(extra, "\n"))
	if record {
		s.Received = filepath.Join(s.Dir, "received")
		tap := filepath.Join(s.Dir, "recorder")
		if err := os.WriteFile(tap, []byte(fmt.Sprintf(recorder, shellQuote(s.Received))), 0o755); err != nil {
			t.Fatal(err)
		}
		config += "ForceCommand " + tap + "\n"
	}
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		_ = os.MkdirAll("/run/sshd", 0o755) // privilege separation
	}
	s.cmd = exec.Command(sshd, "-D", "-e", "-f", cfg)
	var log bytes.Buffer // sshd's own words, shown when a test fails
	s.cmd.Stderr = &log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		if t.Failed() {
			t.Logf("sshd said:\n%s", log.String())
		}
		_ = exec.Command("pkill", "-P", strconv.Itoa(s.cmd.Process.Pid)).Run()
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)), time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd did not listen on %d: %v", s.Port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// FreePort returns a TCP port free on 127.0.0.1 a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// KillConnections ends every connection the server is serving, as a
// crash or a reboot of the host would.
func (s *Server) KillConnections() {
	_ = exec.Command("pkill", "-KILL", "-P", strconv.Itoa(s.cmd.Process.Pid)).Run()
}

// AuthorizeMarked lets a second key in (key: a private key file, its
// .pub beside it), its sessions given env (NAME=value) by sshd, so that
// a recording server tells them apart; the server must have been started
// with "PermitUserEnvironment yes".
func (s *Server) AuthorizeMarked(t testing.TB, key, env string) {
	t.Helper()
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(s.Dir, "authorized_keys"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "environment=%q %s", env, pub); err != nil {
		t.Fatal(err)
	}
}

// RunLocal runs a program here and returns all it printed.
func RunLocal(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}

// WriteKey writes a fresh private key and returns its path.
func WriteKey(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	if out, err := RunLocal("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", p); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	return p
}

// shellQuote single-quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
