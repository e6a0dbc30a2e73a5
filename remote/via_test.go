package remote

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kbisect/internal/shell"
	"kbisect/internal/sshtest"
)

// viaArtifact writes the same artifact (bzImage, modules.tar of
// kernel/m.ko and a symlink) into every dir given.
func viaArtifact(t *testing.T, release string, dirs ...string) {
	t.Helper()
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "kernel", "drivers"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(src, "kernel", "drivers", "m.ko"), []byte("module of "+release), 0o644)
	_ = os.WriteFile(filepath.Join(src, "modules.dep"), []byte("kernel/drivers/m.ko:\n"), 0o644)
	if err := os.Symlink("/usr/src/linux", filepath.Join(src, "build")); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "bzImage"), []byte("the image of "+release), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("tar", "-cf", filepath.Join(d, "modules.tar"), "-C", src, ".").CombinedOutput(); err != nil {
			t.Fatalf("tar: %v %s", err, out)
		}
	}
}

// TestABuildServerSendsTheKernelToTheHostItself: the server's own ssh
// client sends the artifact to the lab host, with the key lent to it or a
// key of its own, and verifies the host by the key this controller
// verified; what it cannot send (another host answers, the kernel is
// gone, another build of it) is a ViaError and the host is left as it
// was.
func TestABuildServerSendsTheKernelToTheHostItself(t *testing.T) {
	// The lab host accepts a second key, the server's, whose sessions it
	// marks (authorized_keys environment=), so that what came from the
	// server is told from what came from here.
	lab := sshtest.StartRecording(t, "PermitUserEnvironment yes")
	serverKey := sshtest.WriteKey(t)
	lab.AuthorizeMarked(t, serverKey, "KBISECT_FROM=server")
	// The server's temporary files go to a directory with a space in
	// its name: ssh's options split at spaces unless quoted.
	spaced := filepath.Join(t.TempDir(), "tmp dir")
	if err := os.Mkdir(spaced, 0o755); err != nil {
		t.Fatal(err)
	}
	srv := sshtest.Start(t, `SetEnv TMPDIR="`+spaced+`"`)

	const rel = "6.12.78-kbisect-abc"
	local, there := t.TempDir(), filepath.Join(t.TempDir(), "artifacts", "0123456789abcdef")
	viaArtifact(t, rel, local, there)
	art := Artifact{Release: rel, Image: filepath.Join(local, "bzImage"), Modules: filepath.Join(local, "modules.tar")}
	h := dial(t, options(lab))
	ctx := context.Background()
	install := func(t *testing.T, from *Host, v Via) (string, error) {
		t.Helper()
		root := t.TempDir()
		v.From = from
		err := h.Install(ctx, art, InstallOptions{Root: root, Via: &v})
		return root, err
	}
	landed := func(t *testing.T, root string) {
		t.Helper()
		for name, want := range map[string]string{
			"boot/vmlinuz-" + rel:                         "the image of " + rel,
			"lib/modules/" + rel + "/kernel/drivers/m.ko": "module of " + rel,
			"lib/modules/" + rel + "/modules.dep":         "kernel/drivers/m.ko:\n",
		} {
			if b, err := os.ReadFile(filepath.Join(root, name)); err != nil || string(b) != want {
				t.Errorf("%s: %q %v", name, b, err)
			}
		}
		if l, err := os.Readlink(filepath.Join(root, "lib/modules", rel, "build")); err != nil || l != "/usr/src/linux" {
			t.Errorf("the modules' build link: %q %v", l, err)
		}
	}
	// The sessions that brought data to the lab host, by who sent them.
	senders := func(t *testing.T) (fromServer, fromHere int) {
		t.Helper()
		rec, err := os.ReadFile(lab.Received)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range strings.Split(string(rec), "== command: ")[1:] {
			if !strings.Contains(s, "tar -xf -") {
				continue
			}
			if strings.Contains(s, "KBISECT_FROM=server") {
				fromServer++
			} else {
				fromHere++
			}
		}
		_ = os.Truncate(lab.Received, 0)
		return
	}
	base := Via{Dir: there, Address: "127.0.0.1", Port: lab.Port, User: lab.User}

	t.Run("a key lent to the server", func(t *testing.T) {
		from := dial(t, options(srv))
		keys, closer, err := LendableKeys(serverKey)
		if err != nil || closer != nil {
			t.Fatal(err, closer)
		}
		if err := from.LendKeys(keys); err != nil {
			t.Fatal(err)
		}
		// The server may sign with the key, not take it away.
		fp, _ := exec.Command("ssh-keygen", "-lf", serverKey+".pub").Output()
		out, _, err := from.Run(ctx, shell.Cmd{Script: "ssh-add -l; ssh-add -D; echo deleted=$?; ssh-add -x </dev/null; echo locked=$?; ssh-add -l"})
		if f := strings.Fields(string(fp)); err != nil || len(f) < 2 || strings.Count(string(out), f[1]) != 2 || !strings.Contains(string(out), "deleted=1") || !strings.Contains(string(out), "locked=1") {
			t.Errorf("the lent agent, listed, asked to delete all keys and to lock, listed again: %q %v; want the key (%s) listed twice and both refused", out, err, fp)
		}
		placed := 0
		v := base
		v.Placed = func() { placed++ }
		root, err := install(t, from, v)
		if err != nil {
			t.Fatal(err)
		}
		if placed != 1 {
			t.Errorf("Placed was called %d times, want once", placed)
		}
		landed(t, root)
		if s, here := senders(t); s != 2 || here != 0 {
			t.Errorf("the image and the modules came %d times from the server and %d from here, want 2 and 0", s, here)
		}
	})
	t.Run("a key of the server's own", func(t *testing.T) {
		v := base
		v.Identity = serverKey
		root, err := install(t, dial(t, options(srv)), v)
		if err != nil {
			t.Fatal(err)
		}
		landed(t, root)
		if s, here := senders(t); s != 2 || here != 0 {
			t.Errorf("came %d times from the server and %d from here, want 2 and 0", s, here)
		}
	})
	// What the server cannot send leaves the host's /boot as it was.
	refused := func(t *testing.T, v Via, once bool, says string) {
		t.Helper()
		root, err := install(t, dial(t, options(srv)), v)
		var ve *ViaError
		if !errors.As(err, &ve) || ve.Once != once || !strings.Contains(err.Error(), says) {
			t.Fatalf("got %v, want a ViaError (once %v) saying %q", err, once, says)
		}
		for _, d := range []string{"boot", "var/tmp/kbisect-stage", "lib/modules"} {
			if _, err := os.Stat(filepath.Join(root, d)); !os.IsNotExist(err) {
				t.Errorf("the host's /%s was touched: %v", d, err)
			}
		}
	}
	t.Run("a probe", func(t *testing.T) {
		v := base
		v.From, v.Identity = dial(t, options(srv)), serverKey
		if err := h.ProbeVia(ctx, v); err != nil {
			t.Errorf("the server's own key: %v", err)
		}
		v.Port = srv.Port
		var ve *ViaError
		if err := h.ProbeVia(ctx, v); !errors.As(err, &ve) || ve.Once || !strings.Contains(err.Error(), "probe to root@127.0.0.1: Host key verification failed") {
			t.Errorf("another host at the address: %v", err)
		}
	})
	t.Run("another host answers at the address", func(t *testing.T) {
		v := base
		v.Identity, v.Port = serverKey, srv.Port // the server's own sshd, another host key
		refused(t, v, false, "Host key verification failed")
	})
	t.Run("the server has no key the host accepts", func(t *testing.T) {
		v := base
		v.Identity = sshtest.WriteKey(t)
		refused(t, v, false, "Permission denied")
	})
	t.Run("the server's cache let the kernel go", func(t *testing.T) {
		v := base
		v.Identity, v.Dir = serverKey, filepath.Join(filepath.Dir(there), "fedcba9876543210")
		refused(t, v, true, "is not there (the server did not build this kernel, or its cache let it go)")
	})
	t.Run("the server holds another build of it", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "artifacts", "0123456789abcdef")
		viaArtifact(t, rel+"-other", other)
		v := base
		v.Identity, v.Dir = serverKey, other
		refused(t, v, true, "not this controller's")
	})
	if s, here := senders(t); s != 0 || here != 0 {
		t.Errorf("a refused copy brought data to the host: %d from the server, %d from here", s, here)
	}
	t.Run("the server holds another build of its modules", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "artifact")
		viaArtifact(t, rel, other)
		f, err := os.OpenFile(filepath.Join(other, "modules.tar"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.Write(make([]byte, 512))
		f.Close()
		v := base
		v.Identity, v.Dir = serverKey, other
		root, err := install(t, dial(t, options(srv)), v)
		var ve *ViaError
		if !errors.As(err, &ve) || !ve.Once || !strings.Contains(err.Error(), "modules.tar there is not this controller's") {
			t.Fatalf("got %v, want a ViaError for this kernel alone", err)
		}
		// The image came; the modules did not, nor the install.
		if b, err := os.ReadFile(filepath.Join(root, "var/tmp/kbisect-stage", rel, "bzImage")); err != nil || string(b) != "the image of "+rel {
			t.Errorf("the staged image: %q %v", b, err)
		}
		for _, d := range []string{"boot", "lib/modules"} {
			if _, err := os.Stat(filepath.Join(root, d)); !os.IsNotExist(err) {
				t.Errorf("the host's /%s was touched: %v", d, err)
			}
		}
		if s, here := senders(t); s != 1 || here != 0 {
			t.Errorf("%d copies from the server, %d from here; want the image's alone", s, here)
		}
	})
}

// BenchmarkInstallFromTheBuildServer installs a kernel of a distribution's
// size (a 12 MB image, 120 MB of modules in 3,000 files) on the lab host
// when this controller reaches it over a link of KBISECT_BENCH_LINK
// Mbit/s (default 100: an office or a VPN), and the build server over
// the lab's own network (here: loopback): through the controller, and
// sent by the server itself.
func BenchmarkInstallFromTheBuildServer(b *testing.B) {
	mbit := 100.0
	if v := os.Getenv("KBISECT_BENCH_LINK"); v != "" {
		if _, err := fmt.Sscan(v, &mbit); err != nil || mbit <= 0 {
			b.Fatalf("KBISECT_BENCH_LINK=%q: give Mbit/s", v)
		}
	}
	lab, srv := sshtest.Start(b), sshtest.Start(b)
	local, there := b.TempDir(), filepath.Join(b.TempDir(), "artifact")
	mods := makeTree(b, 3000, 40<<10)
	image := make([]byte, 12<<20)
	_, _ = rand.Read(image)
	for _, d := range []string{local, there} {
		_ = os.MkdirAll(d, 0o755)
		if err := os.WriteFile(filepath.Join(d, "bzImage"), image, 0o644); err != nil {
			b.Fatal(err)
		}
		if out, err := exec.Command("tar", "-cf", filepath.Join(d, "modules.tar"), "-C", mods, ".").CombinedOutput(); err != nil {
			b.Fatalf("tar: %v %s", err, out)
		}
	}
	// The controller's link: a proxy that passes mbit a second each way.
	port := throttle(b, lab.Port, mbit)
	opt := options(lab)
	opt.Port = port
	opt.KnownHosts = filepath.Join(b.TempDir(), "known_hosts")
	line := strings.Replace(lab.HostLine, fmt.Sprintf(":%d ", lab.Port), fmt.Sprintf(":%d ", port), 1)
	if err := os.WriteFile(opt.KnownHosts, []byte(line+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	h := dial(b, opt)
	from := dial(b, options(srv))
	art := Artifact{Release: "6.12.78-kbisect-bench", Image: filepath.Join(local, "bzImage"), Modules: filepath.Join(local, "modules.tar")}
	for _, c := range []struct {
		name string
		via  *Via
	}{
		{"through-the-controller", nil},
		{"from-the-build-server", &Via{From: from, Dir: there, Address: "127.0.0.1", Port: lab.Port, User: lab.User, Identity: lab.Identity}},
	} {
		b.Run(c.name, func(b *testing.B) {
			start := time.Now()
			for range b.N {
				if err := h.Install(context.Background(), art, InstallOptions{Root: b.TempDir(), Via: c.via}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "s/install")
			b.ReportMetric(mbit, "link-Mbit/s")
		})
	}
}

// throttle forwards a local port to 127.0.0.1:to, each direction at
// mbit Mbit/s, and returns the port.
func throttle(b *testing.B, to int, mbit float64) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	pace := func(dst, src net.Conn) {
		defer dst.Close()
		buf := make([]byte, 16<<10)
		start, sent := time.Now(), 0
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
				sent += n
				due := start.Add(time.Duration(float64(sent*8) / (mbit * 1e6) * float64(time.Second)))
				time.Sleep(time.Until(due))
			}
			if err != nil {
				return
			}
		}
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(to)))
			if err != nil {
				c.Close()
				continue
			}
			go pace(up, c)
			go pace(c, up)
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

func TestOnlyAConnectionThatMayWorkAgainIsPassing(t *testing.T) {
	for why, want := range map[string]bool{
		"ssh: connect to host 10.0.0.7 port 22: Connection refused":        true,
		"ssh: connect to host 10.0.0.7 port 22: Connection timed out":      true,
		"ssh: connect to host 10.0.0.7 port 22: No route to host":          true,
		"Connection closed by 10.0.0.7 port 22":                            true,
		"root@10.0.0.7: Permission denied (publickey).":                    false,
		"Host key verification failed.":                                    false,
		"ssh: Could not resolve hostname lab-7: Name or service not known": false,
	} {
		if got := sshMayPass(255, why); got != want {
			t.Errorf("ssh said %q: passing %v, want %v", why, got, want)
		}
	}
	if sshMayPass(1, "Connection refused") {
		t.Error("a command's own exit 1 is taken for ssh's connection failing")
	}
}
