package remote

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kbisect/internal/shell"
	"kbisect/internal/sshtest"
)

func TestCommandsRunOverRealSSH(t *testing.T) {
	s := sshtest.Start(t)
	h := dial(t, options(s))
	out, _, err := h.Run(context.Background(), shell.Cmd{Script: `echo "$KBISECT_SECRET"; echo "args: $*"`, Env: []string{"KBISECT_SECRET=it's a $ecret"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "it's a $ecret\nargs: \n" {
		t.Errorf("stdout %q", out)
	}
	_, _, err = h.Run(context.Background(), shell.Cmd{Script: "echo out; echo 'the reason' >&2; exit 3"})
	var ee *shell.ExitError
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
	done := runAsync(h, "echo started; sleep 60")
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
	_, _, err := h.Run(ctx, shell.Cmd{Script: "sleep 60"})
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

// TestAHandshakeCalledOffSaysSo: a dial whose caller gave up during the
// handshake is context.Canceled, not a host that never spoke SSH.
func TestAHandshakeCalledOffSaysSo(t *testing.T) {
	opt := Options{Address: "127.0.0.1", Port: silentTarget(t), User: "root", Identity: sshtest.WriteKey(t), ConnectTimeout: 30 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err := Dial(ctx, opt)
	var ie *InfraError
	if !errors.As(err, &ie) || ie.Op != "handshake" || !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "no SSH handshake") {
		t.Errorf("got %v; want a handshake called off", err)
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

// writeTestTarball writes a tarball of the given entries: a name ending
// in "/" is a directory, "name -> target" a symbolic link, else a file
// holding its own name.
func writeTestTarball(t *testing.T, entries ...string) string {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		name, target, isLink := strings.Cut(e, " -> ")
		hdr := &tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(name))}
		switch {
		case isLink:
			hdr = &tar.Header{Name: name, Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: target}
		case strings.HasSuffix(name, "/"):
			hdr = &tar.Header{Name: name, Mode: 0o755, Typeflag: tar.TypeDir}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			tw.Write([]byte(name))
		}
	}
	tw.Close()
	p := filepath.Join(t.TempDir(), "modules.tar")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCopyTarballUnpacksOnTheHostAndChecksWhatArrived(t *testing.T) {
	s := sshtest.Start(t)
	h := dial(t, options(s))
	ctx := context.Background()
	tarball := writeTestTarball(t, "kernel/", "kernel/fs/", "kernel/fs/ext4.ko", "./modules.dep", "build -> /usr/src/linux")
	dst := filepath.Join(t.TempDir(), "lib", "modules", "6.12.0-kbisect")
	stats, err := h.CopyTarball(ctx, tarball, dst)
	if err != nil || stats.Files != 2 {
		t.Fatalf("%+v %v", stats, err)
	}
	for _, rel := range []string{"kernel/fs/ext4.ko", "modules.dep"} {
		if b, err := os.ReadFile(filepath.Join(dst, rel)); err != nil || !strings.HasSuffix(string(b), rel) {
			t.Errorf("%s: %q %v", rel, b, err)
		}
	}
	if link, err := os.Readlink(filepath.Join(dst, "build")); err != nil || link != "/usr/src/linux" {
		t.Errorf("symlink: %q %v", link, err)
	}
	// Entries that would land outside the directory are refused.
	outside := filepath.Join(t.TempDir(), "outside")
	for bad, want := range map[string]string{
		"../escaped":        `the tarball's entry "../escaped" lands outside the directory`,
		"/etc/escaped":      `the tarball's entry "/etc/escaped" lands outside the directory`,
		"up/escaped":        `the tarball's entry "up/escaped" goes through the symbolic link up`,
		"kernel/../../oops": `the tarball's entry "kernel/../../oops" lands outside the directory`,
	} {
		_, err := h.CopyTarball(ctx, writeTestTarball(t, "up -> "+outside, bad), filepath.Join(t.TempDir(), "m"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Errorf("something landed outside: %v", err)
	}
}

func TestLoadArtifactPrefersTheModulesTarball(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"kernel.release": "6.12.78-kbisect-0123456789ab\n", "bzImage": "k", "modules.tar": "", "modules/kernel/m.ko": "m"} {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, err := LoadArtifact(dir)
	if err != nil || a.Release != "6.12.78-kbisect-0123456789ab" || a.Image != filepath.Join(dir, "bzImage") || a.Modules != filepath.Join(dir, "modules.tar") {
		t.Errorf("%+v %v", a, err)
	}
	os.Remove(filepath.Join(dir, "modules.tar"))
	if a, err := LoadArtifact(dir); err != nil || a.Modules != filepath.Join(dir, "modules") {
		t.Errorf("without the tarball: %+v %v", a, err)
	}
}
