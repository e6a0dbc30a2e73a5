package remote

import (
	"bytes"
	"context"
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

// testSSHD is a real OpenSSH sshd on 127.0.0.1 with throwaway keys.
type testSSHD struct {
	dir        string
	port       int
	user       string
	identity   string // a key the server accepts
	knownHosts string // holds the server's host key
	hostLine   string
	cmd        *exec.Cmd
}

// startSSHD starts sshd for the test. Without sshd the real-SSH tests say
// so by name and skip; CI sets KBISECT_REQUIRE_SSHD, where a missing sshd
// fails.
func startSSHD(t testing.TB) *testSSHD {
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
	s := &testSSHD{dir: t.TempDir(), user: me.Username}
	keygen := func(name string) string {
		p := filepath.Join(s.dir, name)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", p).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
		return p
	}
	hostKey := keygen("host_key")
	s.identity = keygen("user_key")
	pub, err := os.ReadFile(s.identity + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, "authorized_keys"), pub, 0o600); err != nil {
		t.Fatal(err)
	}
	s.port = freePort(t)
	hostPub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(hostPub))
	s.hostLine = fmt.Sprintf("[127.0.0.1]:%d %s %s", s.port, f[0], f[1])
	s.knownHosts = filepath.Join(s.dir, "known_hosts")
	if err := os.WriteFile(s.knownHosts, []byte(s.hostLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(s.dir, "sshd_config")
	config := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
PidFile %s
AuthorizedKeysFile %s
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
LogLevel ERROR
`, s.port, hostKey, filepath.Join(s.dir, "sshd.pid"), filepath.Join(s.dir, "authorized_keys"))
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
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)), time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd did not listen on %d: %v", s.port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *testSSHD) options() Options {
	return Options{Address: "127.0.0.1", Port: s.port, User: s.user, Identity: s.identity, KnownHosts: s.knownHosts,
		ConnectTimeout: 10 * time.Second, Keepalive: time.Second}
}

func (s *testSSHD) dial(t *testing.T, opt Options) *Host {
	t.Helper()
	h, err := Dial(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// killConnections ends every connection the server is serving, as a
// crash or a reboot of the host would.
func (s *testSSHD) killConnections() {
	_ = exec.Command("pkill", "-KILL", "-P", strconv.Itoa(s.cmd.Process.Pid)).Run()
}

func runLocal(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}

// writeKey writes a fresh private key and returns its path.
func writeKey(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	if out, err := runLocal("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", p); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	return p
}
