package remote

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"kbisect/internal/shell"
	"kbisect/internal/sshtest"
)

// backends are the machines the conformance suite runs against: a real
// OpenSSH sshd and the emulated lab host.
func backends() []struct {
	name string
	dial func(t *testing.T) *Host
} {
	return []struct {
		name string
		dial func(t *testing.T) *Host
	}{
		{"openssh", func(t *testing.T) *Host { return dial(t, options(sshtest.Start(t))) }},
		{"simhost", func(t *testing.T) *Host { _, opt := simLab(t); return dial(t, opt) }},
	}
}

// TestEveryBackendBehavesAlike is the conformance suite: whatever answers
// kbisect, the same operations give the same answers.
func TestEveryBackendBehavesAlike(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			h := b.dial(t)
			ctx := context.Background()

			out, errOut, err := h.Run(ctx, shell.Cmd{Script: "echo out; echo err >&2; cat; echo \"$SECRET\"", Env: []string{"SECRET=it's $ecret"}})
			if err != nil || string(out) != "out\nit's $ecret\n" || string(errOut) != "err\n" {
				t.Errorf("run: %q %q %v", out, errOut, err)
			}
			_, _, err = h.Run(ctx, shell.Cmd{Script: "echo why >&2; exit 7"})
			var ee *shell.ExitError
			if !errors.As(err, &ee) || ee.Code != 7 || err.Error() != "exit status 7: why" {
				t.Errorf("exit: %v", err)
			}

			f, err := h.Facts(ctx)
			if err != nil || f.Release == "" || len(f.BootID) != 36 {
				t.Errorf("facts: %+v %v", f, err)
			}

			// The running kernel's config: the emulated host has one,
			// this machine (the real sshd's) has one when either file is
			// there, and says which it lacks when not.
			cfg, release, err := h.RunningConfig(ctx)
			switch {
			case b.name == "openssh" && !hasRunningConfig(f.Release):
				if err == nil || !strings.Contains(err.Error(), "neither /proc/config.gz") {
					t.Errorf("running config without one: %v", err)
				}
			case err != nil || release != f.Release || !strings.Contains(string(cfg), "\nCONFIG_") || strings.HasPrefix(string(cfg), f.Release):
				t.Errorf("running config of %s: %q… %v", release, firstLine(cfg), err)
			}

			dir := filepath.Join(t.TempDir(), "copy")
			stats, err := h.Copy(ctx, makeTree(t, 30, 4096), dir)
			if err != nil || stats.Files != 30 || stats.Bytes != 30*4096 {
				t.Errorf("copy: %+v %v", stats, err)
			}

			// A script that prints past the cap is stopped there, its
			// first MaxOutput bytes kept. (What a server does not signal
			// is left to the host: the sleep is short.)
			guard, stop := context.WithTimeout(ctx, 2*time.Minute)
			defer stop()
			flood, _, err := h.Run(guard, shell.Cmd{Script: "head -c " + strconv.Itoa(shell.MaxOutput+1) + " /dev/zero; sleep 20"})
			var oe *shell.OutputError
			if !errors.As(err, &oe) || oe.Stream != "stdout" || oe.Limit != shell.MaxOutput || len(flood) != shell.MaxOutput {
				t.Errorf("a script past the output cap: %d bytes, %v", len(flood), err)
			}

			short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			if _, _, err := h.Run(short, shell.Cmd{Script: "sleep 30"}); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
				t.Errorf("deadline: %v after %v", err, time.Since(start))
			}
		})
	}
}

func TestAJumpHostLeadsToTheLabHost(t *testing.T) {
	bastion := sshtest.Start(t)
	sim, opt := simLab(t)
	both := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(both, []byte(bastion.HostLine+"\n"+sim.KnownHostsLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The bastion takes the user's key; the lab host its own.
	opt.KnownHosts = both
	opt.Jump = bastion.User + "@127.0.0.1:" + itoa(bastion.Port)
	opt.Identity = sim.Identity
	if _, err := Dial(context.Background(), opt); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("the bastion took a key it does not know: %v", err)
	}
	authorize(t, bastion, sim.Identity)
	h := dial(t, opt)
	f, err := h.Facts(context.Background())
	if err != nil || f.Release != defaultKernel {
		t.Errorf("%+v %v", f, err)
	}
}

// authorize adds a private key's public half to the server's keys.
func authorize(t *testing.T, s *sshtest.Server, identity string) {
	t.Helper()
	pub, err := sshtest.RunLocal("ssh-keygen", "-y", "-f", identity)
	if err != nil {
		t.Fatalf("%v %s", err, pub)
	}
	f, err := os.OpenFile(filepath.Join(s.Dir, "authorized_keys"), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(pub); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// freezer forwards TCP to target until frozen, then swallows everything
// without closing: a host whose network died under it.
type freezer struct {
	l      net.Listener
	mu     sync.Mutex
	frozen bool
}

func newFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go f.pipe(c, up)
			go f.pipe(up, c)
		}
	}()
	return f
}

func (f *freezer) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		f.mu.Lock()
		frozen := f.frozen
		f.mu.Unlock()
		if frozen {
			continue // dropped on the floor
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (f *freezer) freeze() { f.mu.Lock(); f.frozen = true; f.mu.Unlock() }

func TestKeepalivesNoticeADeadPeer(t *testing.T) {
	sim, opt := simLab(t)
	f := newFreezer(t, "127.0.0.1:"+itoa(sim.Port))
	opt.Port = f.l.Addr().(*net.TCPAddr).Port
	// The known_hosts line names the emulated host's port; the proxy's
	// port needs its own.
	line := strings.Replace(sim.KnownHostsLine, "]:"+itoa(sim.Port)+" ", "]:"+itoa(opt.Port)+" ", 1)
	if err := os.WriteFile(opt.KnownHosts, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opt.Keepalive = 200 * time.Millisecond
	h := dial(t, opt)
	done := runAsync(h, "sleep 30")
	time.Sleep(300 * time.Millisecond)
	f.freeze()
	select {
	case err := <-done:
		var ie *InfraError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "no answer to 3 keepalives 200ms apart") {
			t.Errorf("got %T %v", err, err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a dead peer went unnoticed")
	}
}

// hasRunningConfig says whether this machine has its kernel's config.
func hasRunningConfig(release string) bool {
	for _, p := range []string{"/proc/config.gz", "/boot/config-" + release} {
		if f, err := os.Open(p); err == nil {
			f.Close()
			return true
		}
	}
	return false
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(string(b), "\n")
	return line
}
