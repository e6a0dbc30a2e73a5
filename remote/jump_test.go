package remote

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kbisect/internal/shell"
	"kbisect/internal/sshtest"
)

// established counts the TCP connections to 127.0.0.1:port that are
// established on this side: a client that closed its end has none (its
// socket is in FIN_WAIT or gone at once, whatever the server does).
func established(t *testing.T, port int) int {
	t.Helper()
	f, err := os.Open("/proc/self/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := fmt.Sprintf("0100007F:%04X", port)
	n := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		// sl local_address rem_address st ...
		if f := strings.Fields(s.Text()); len(f) > 3 && f[2] == want && f[3] == "01" {
			n++
		}
	}
	return n
}

// silentTarget accepts TCP connections and never says a word.
func silentTarget(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// unreachableTarget is a port whose connections never complete: a
// listener that accepts nothing, its queue filled, drops every SYN.
func unreachableTarget(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err != nil {
			break // the queue is full: this SYN was dropped
		}
		t.Cleanup(func() { c.Close() })
		if i == 8 {
			t.Fatalf("a listen queue of 0 took %d connections: this kernel does not drop SYNs on a full queue", i+1)
		}
	}
	return port
}

// TestAJumpHostsConnectionIsClosedWhenTheTargetFails: through a real
// sshd as the jump host, a target that never completes the TCP
// connection (the dial through the jump host times out) and one that
// never answers the SSH handshake both fail the dial, saying which step,
// and leave no connection to the jump host open.
func TestAJumpHostsConnectionIsClosedWhenTheTargetFails(t *testing.T) {
	bastion := sshtest.Start(t)
	base := options(bastion)
	// The counter sees a connection to the bastion while it is open.
	h := dial(t, base)
	if n := established(t, bastion.Port); n != 1 {
		t.Fatalf("%d connections to the bastion while one is open", n)
	}
	h.Close()
	if n := established(t, bastion.Port); n != 0 {
		t.Fatalf("%d connections to the bastion after Close", n)
	}
	for _, c := range []struct {
		name   string
		port   int
		op     string
		reason string
	}{
		{"dial times out", unreachableTarget(t), "dial through 127.0.0.1:" + itoa(bastion.Port), "no connection within 2s"},
		{"handshake times out", silentTarget(t), "handshake", "no SSH handshake within 2s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opt := base
			opt.Port, opt.ConnectTimeout, opt.Keepalive = c.port, 2*time.Second, 0
			opt.Jump = bastion.User + "@127.0.0.1:" + itoa(bastion.Port)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			h, err := Dial(ctx, opt)
			if err == nil {
				h.Close()
				t.Fatal("the dial through the bastion to a dead target succeeded")
			}
			want := fmt.Sprintf("127.0.0.1:%d: %s: %s", c.port, c.op, c.reason)
			if err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
			if n := established(t, bastion.Port); n != 0 {
				t.Errorf("%d connections to the jump host are left open after the failed dial", n)
			}
		})
	}
}

// TestAJumpHostsConnectionEndsWithTheTargets: when the lab host's
// connection dies under a live Host (a crash or a reboot of the host),
// the connection to the jump host ends with it, without waiting for
// Close: a run that waits for the host to come back does not hold one
// jump connection per attempt.
func TestAJumpHostsConnectionEndsWithTheTargets(t *testing.T) {
	bastion, target := sshtest.Start(t), sshtest.Start(t)
	both := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(both, []byte(bastion.HostLine+"\n"+target.HostLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	authorize(t, bastion, target.Identity)
	opt := options(target)
	opt.KnownHosts, opt.Keepalive = both, 0
	opt.Jump = bastion.User + "@127.0.0.1:" + itoa(bastion.Port)
	h := dial(t, opt)
	if out, _, err := h.Run(context.Background(), shell.Cmd{Script: "echo through"}); err != nil || string(out) != "through\n" {
		t.Fatalf("through the jump host: %q %v", out, err)
	}
	if n := established(t, bastion.Port); n != 1 {
		t.Fatalf("%d connections to the jump host while the host's is open", n)
	}
	target.KillConnections()
	// The end of the host's connection reaches this side through the
	// jump host; wait for it, a minute at most.
	giveUp := time.Now().Add(time.Minute)
	for established(t, bastion.Port) != 0 {
		if _, _, err := h.Run(context.Background(), shell.Cmd{Script: "true"}); err == nil {
			t.Fatal("a command ran on a host whose connections were killed")
		}
		if time.Now().After(giveUp) {
			t.Fatal("the jump host's connection is still open a minute after the host's died")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
