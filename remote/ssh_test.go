package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"kbisect/internal/sshtest"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kbisect/noise"
)

func TestCommandsRunOverRealSSH(t *testing.T) {
	s := sshtest.Start(t)
	h := dial(t, options(s))
	out, _, err := h.Run(context.Background(), noise.Cmd{Script: `echo "$KBISECT_SECRET"; echo "args: $*"`, Env: []string{"KBISECT_SECRET=it's a $ecret"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "it's a $ecret\nargs: \n" {
		t.Errorf("stdout %q", out)
	}
	_, _, err = h.Run(context.Background(), noise.Cmd{Script: "echo out; echo 'the reason' >&2; exit 3"})
	var ee *noise.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || err.Error() != "exit status 3: the reason" {
		t.Errorf("got %v", err)
	}
}

func TestAnUnknownHostKeyIsRefusedWithTheLineToAdd(t *testing.T) {
	s := sshtest.Start(t)
	opt := options(s)
	opt.KnownHosts = filepath.Join(t.TempDir(), "known_hosts") // does not exist yet
	_, err := Dial(context.Background(), opt)
	var hk *HostKeyError
	if !errors.As(err, &hk) || hk.Changed || hk.Line != s.HostLine || !strings.Contains(err.Error(), "unknown host key SHA256:") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(opt.KnownHosts); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("known_hosts written without accepting: %v", err)
	}
	opt.AcceptNewHostKey = true
	dial(t, opt)
	got, _ := os.ReadFile(opt.KnownHosts)
	if string(got) != s.HostLine+"\n" {
		t.Errorf("known_hosts now %q", got)
	}
}

func TestAChangedHostKeyIsRefusedEvenWhenNewKeysAreAccepted(t *testing.T) {
	s := sshtest.Start(t)
	opt := options(s)
	other := strings.Replace(s.HostLine, strings.Fields(s.HostLine)[2], "AAAAC3NzaC1lZDI1NTE5AAAAIOeVIG1K5+4MxNpMoFMiAmqLBQ3k2oq2FfmjZ9l7J8Vr", 1)
	opt.KnownHosts = filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(opt.KnownHosts, []byte(other+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opt.AcceptNewHostKey = true
	_, err := Dial(context.Background(), opt)
	var hk *HostKeyError
	if !errors.As(err, &hk) || !hk.Changed || !strings.Contains(err.Error(), "the host key CHANGED") || !strings.Contains(err.Error(), opt.KnownHosts+":1") {
		t.Fatalf("got %v", err)
	}
}

func TestAKeyTheHostDoesNotKnowIsRefusedClearly(t *testing.T) {
	s := sshtest.Start(t)
	opt := options(s)
	other := filepath.Join(t.TempDir(), "other")
	if out, err := sshtest.RunLocal("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	opt.Identity = other
	_, err := Dial(context.Background(), opt)
	var ie *InfraError
	if !errors.As(err, &ie) || ie.Op != "handshake" || !strings.Contains(err.Error(), "refused "+other+": add the public key to its ~/.ssh/authorized_keys") {
		t.Errorf("got %v", err)
	}
}

func TestAConnectionKilledMidCommandIsAnInfrastructureError(t *testing.T) {
	s := sshtest.Start(t)
	h := dial(t, options(s))
	done := make(chan error, 1)
	go func() {
		_, _, err := h.Run(context.Background(), noise.Cmd{Script: "echo started; sleep 60"})
		done <- err
	}()
	time.Sleep(500 * time.Millisecond)
	s.KillConnections()
	select {
	case err := <-done:
		var ie *InfraError
		if !errors.As(err, &ie) || ie.Op != "run" {
			t.Errorf("got %T %v", err, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the command did not end when its connection died")
	}
}

func TestARemoteCommandEndsWithItsDeadline(t *testing.T) {
	s := sshtest.Start(t)
	h := dial(t, options(s))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := h.Run(ctx, noise.Cmd{Script: "sleep 60"})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Errorf("got %v after %v", err, time.Since(start))
	}
}

func TestAHostThatNeverSpeaksSSHTimesOut(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // accepts, says nothing
		}
	}()
	opt := Options{Address: "127.0.0.1", Port: l.Addr().(*net.TCPAddr).Port, User: "root", Identity: sshtest.WriteKey(t), ConnectTimeout: time.Second}
	start := time.Now()
	_, err = Dial(context.Background(), opt)
	var ie *InfraError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "no SSH handshake within 1s") || time.Since(start) > 10*time.Second {
		t.Errorf("got %v after %v", err, time.Since(start))
	}
}

func TestCopySendsATreeAndChecksWhatArrived(t *testing.T) {
	s := sshtest.Start(t)
	h := dial(t, options(s))
	src := makeTree(t, 200, 20<<10)
	if err := os.Symlink("/usr/src/linux", filepath.Join(src, "build")); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "lib", "modules", "6.12.0-kbisect")
	stats, err := h.Copy(context.Background(), src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Files != 200 {
		t.Errorf("%+v", stats)
	}
	for _, rel := range []string{"d3/f3.ko", "d7/f187.ko"} {
		a, _ := os.ReadFile(filepath.Join(src, rel))
		b, err := os.ReadFile(filepath.Join(dst, rel))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: %v", rel, err)
		}
	}
	if link, err := os.Readlink(filepath.Join(dst, "build")); err != nil || link != "/usr/src/linux" {
		t.Errorf("symlink: %q %v", link, err)
	}
}

func TestCopySaysWhichFilesDidNotArrive(t *testing.T) {
	sent := map[string]string{"./a": "11", "./b": "22", "./c": "33"}
	err := compareSums(sent, "11  ./a\n99  ./b\n")
	if err == nil || err.Error() != "2 files did not arrive intact: ./b (different), ./c (missing)" {
		t.Errorf("got %v", err)
	}
}

// BenchmarkCopyModulesTree copies a tree shaped like a kernel's modules
// (3,000 files, 120 MB) to the test sshd over loopback and reports MB/s.
func BenchmarkCopyModulesTree(b *testing.B) {
	s := sshtest.Start(b)
	h, err := Dial(context.Background(), options(s))
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	src := makeTree(b, 3000, 40<<10)
	b.ResetTimer()
	var bytes int64
	for i := 0; i < b.N; i++ {
		stats, err := h.Copy(context.Background(), src, filepath.Join(b.TempDir(), "modules"))
		if err != nil {
			b.Fatal(err)
		}
		bytes = stats.Bytes
	}
	b.SetBytes(bytes)
}

// makeTree writes n files of size bytes of random data in 10 directories.
func makeTree(t testing.TB, n, size int) string {
	t.Helper()
	dir := t.TempDir()
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		sub := filepath.Join(dir, fmt.Sprintf("d%d", i%10))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		_, _ = rand.Read(buf)
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%d.ko", i)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
