package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kbisect/configs"
	"kbisect/internal/sshtest"
	"kbisect/kbuild"
	"kbisect/remote"
)

// TestTheBuildServerSendsItsKernelsToTheLabHostItself: a kernel the
// server built goes from its cache to the lab host over the server's own
// ssh, not through this controller; one the server holds as another
// build goes through here, that one alone; one the server cannot reach
// for a while goes through here, and so do the next few, before the
// server tries again; a server the lab host refuses sends nothing more
// for the rest of the run.
func TestTheBuildServerSendsItsKernelsToTheLabHostItself(t *testing.T) {
	exe := testKbisect(t)
	local, commits := serverTree(t, map[string]string{"kernel/eventpoll.c": "int ep_poll_callback(void) { return 2; }\n"})
	server, home := buildServerFor(t, local, exe)
	frag := filepath.Join(t.TempDir(), "rt.config")
	if err := os.WriteFile(frag, []byte("CONFIG_EXPERT=y\nCONFIG_PREEMPT_RT=y\nCONFIG_MODULES=y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var log bytes.Buffer
	o := kbuild.Options{Tree: local, Base: "tinyconfig", Fragments: []string{frag}, Jobs: 2, CacheDir: t.TempDir(), Log: &log, Server: server}
	built, err := kbuild.Build(ctx, o, 0, commits[1])
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}

	// The lab host marks the sessions of the server's key.
	lab := sshtest.StartRecording(t, "PermitUserEnvironment yes")
	serverKey := sshtest.WriteKey(t)
	lab.AuthorizeMarked(t, serverKey, "KBISECT_FROM=server")
	h, err := remote.Dial(ctx, remote.Options{Address: "127.0.0.1", Port: lab.Port, User: lab.User, Identity: lab.Identity,
		KnownHosts: lab.KnownHosts, ConnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	to := &ToLab{Address: "127.0.0.1", Port: lab.Port, User: lab.User, Identity: serverKey}

	// install installs the artifact of dir and says what the run was
	// told and who sent the files.
	install := func(t *testing.T, dir string) (notes []string, fromServer, fromHere int) {
		t.Helper()
		art, err := remote.LoadArtifact(dir)
		if err != nil {
			t.Fatal(err)
		}
		root := t.TempDir()
		if err := to.install(ctx, server, h, art, remote.InstallOptions{Root: root}, func(n string) { notes = append(notes, n) }); err != nil {
			t.Fatal(err)
		}
		image, _ := os.ReadFile(art.Image)
		if b, err := os.ReadFile(filepath.Join(root, "boot", "vmlinuz-"+art.Release)); err != nil || !bytes.Equal(b, image) {
			t.Errorf("the image on the host: %d bytes, %v; want the %d of %s", len(b), err, len(image), art.Image)
		}
		if mods, _ := filepath.Glob(filepath.Join(root, "lib", "modules", art.Release, "kernel", "*")); len(mods) == 0 {
			t.Errorf("no modules landed in %s", filepath.Join(root, "lib", "modules", art.Release))
		}
		rec, err := os.ReadFile(lab.Received)
		if err != nil {
			t.Fatal(err)
		}
		_ = os.Truncate(lab.Received, 0)
		for _, s := range strings.Split(string(rec), "== command: ")[1:] {
			switch {
			case !strings.Contains(s, "tar -xf -"):
			case strings.Contains(s, "KBISECT_FROM=server"):
				fromServer++
			default:
				fromHere++
			}
		}
		return notes, fromServer, fromHere
	}

	if got := to.checked(ctx, server, h); got != "the build server sends kernels to the lab host itself" {
		t.Errorf("host check says %q", got)
	}
	notes, fromServer, fromHere := install(t, built.Dir)
	if fromServer != 2 || fromHere != 0 || len(notes) != 1 || notes[0] != "sent by the build server straight to the lab host" {
		t.Errorf("the server's kernel: %d copies from the server, %d from here, the run told %q; want 2, 0 and that it was sent by the server", fromServer, fromHere, notes)
	}

	// The server's cache holds another build of it (another make of the
	// same inputs: modules.tar keeps the install's mtimes).
	there := filepath.Join(home, ".cache", "kbisect", "build-cache", "artifacts", built.Key, "modules.tar")
	tarball, err := os.ReadFile(there)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(there, append(tarball, make([]byte, 512)...), 0o644); err != nil {
		t.Fatal(err)
	}
	notes, fromServer, fromHere = install(t, built.Dir)
	if fromServer != 1 || fromHere != 2 || len(notes) != 1 || !strings.Contains(notes[0], "not this controller's") || !strings.Contains(notes[0], "this kernel goes through this controller") || to.Off() != nil {
		t.Errorf("another build of it: %d copies from here (%d from the server), the run told %q, direct copies off: %v; want 2 from here, for this kernel alone", fromHere, fromServer, notes, to.Off())
	}

	if err := os.WriteFile(there, tarball, 0o644); err != nil {
		t.Fatal(err)
	}
	// This controller's key for the lab host, lent to the server.
	to.Identity, to.Lend, to.LabIdentity = "", true, serverKey
	notes, fromServer, fromHere = install(t, built.Dir)
	if fromServer != 2 || fromHere != 0 || len(notes) != 1 || notes[0] != "sent by the build server straight to the lab host" {
		t.Errorf("with the key lent: %d copies from the server, %d from here, the run told %q; want 2 and 0", fromServer, fromHere, notes)
	}
	to.Lend, to.LabIdentity = false, ""

	// A boot called off (the search ended while it was on its way) is
	// no fault of the server's: nothing said, no wait, the next kernel
	// goes from the server again.
	to.Identity = serverKey
	art, err := remote.LoadArtifact(built.Dir)
	if err != nil {
		t.Fatal(err)
	}
	off, cancel := context.WithCancel(ctx)
	cancel()
	var said []string
	if err := to.install(off, server, h, art, remote.InstallOptions{Root: t.TempDir()}, func(n string) { said = append(said, n) }); !errors.Is(err, context.Canceled) || len(said) != 0 {
		t.Errorf("a boot called off: %v, the run told %q; want context.Canceled and nothing said", err, said)
	}
	if notes, fromServer, fromHere = install(t, built.Dir); fromServer != 2 || fromHere != 0 {
		t.Errorf("after a boot called off: %d copies from the server, %d from here, the run told %q; want 2 and 0", fromServer, fromHere, notes)
	}

	// A lab host the server cannot reach for a while (rebooting, say):
	// the kernel and the next 3 go through here, then the server tries
	// again, and after another failure in a row waits twice as long.
	to.Identity, to.Port = serverKey, closedPort(t)
	for i, wait := range []int{3, 6} {
		notes, fromServer, fromHere = install(t, built.Dir)
		if fromServer != 0 || fromHere != 2 || len(notes) != 1 || !strings.Contains(notes[0], "Connection refused") ||
			!strings.Contains(notes[0], fmt.Sprintf("this kernel and the next %d installs go through this controller, then the build server tries again", wait)) || to.Off() != nil {
			t.Errorf("unreachable, try %d: %d from the server, %d from here, the run told %q, off: %v; want 0, 2, and the next %d through here", i+1, fromServer, fromHere, notes, to.Off(), wait)
		}
		if i == 1 {
			to.Port = lab.Port // back: the server is not asked until its wait is over
		}
		for k := 0; k < wait; k++ {
			if notes, fromServer, fromHere = install(t, built.Dir); fromServer != 0 || fromHere != 2 || len(notes) != 0 {
				t.Errorf("kernel %d of the wait of %d: %d from the server, %d from here, told %q; want all from here, nothing said", k+1, wait, fromServer, fromHere, notes)
			}
		}
	}
	notes, fromServer, fromHere = install(t, built.Dir)
	if fromServer != 2 || fromHere != 0 || len(notes) != 1 || notes[0] != "sent by the build server straight to the lab host" {
		t.Errorf("reachable again: %d copies from the server, %d from here, the run told %q; want 2 and 0", fromServer, fromHere, notes)
	}
	// A kernel sent resets the wait: the next failure waits 3 again.
	to.Port = closedPort(t)
	if notes, _, _ = install(t, built.Dir); len(notes) != 1 || !strings.Contains(notes[0], "the next 3 installs go through this controller") {
		t.Errorf("unreachable again after a kernel was sent: the run told %q; want a wait of 3", notes)
	}
	for k := 0; k < 3; k++ {
		install(t, built.Dir)
	}
	to.Port = lab.Port

	to.Identity = sshtest.WriteKey(t) // a key the lab host refuses
	if got := to.checked(ctx, server, h); !strings.HasPrefix(got, "kernels will go through this controller, the build server cannot send them to the lab host itself (") || !strings.Contains(got, "Permission denied") {
		t.Errorf("host check with a key the lab host refuses says %q", got)
	}
	notes, fromServer, fromHere = install(t, built.Dir)
	if fromServer != 0 || fromHere != 2 || len(notes) != 1 || !strings.Contains(notes[0], "Permission denied") || !strings.Contains(notes[0], "from now on") || to.Off() == nil {
		t.Errorf("a refused server: %d from the server, %d from here, the run told %q; want 0, 2, and why direct copies are off", fromServer, fromHere, notes)
	}
	to.Identity = serverKey // accepted again: the run no longer asks
	notes, fromServer, fromHere = install(t, built.Dir)
	if fromServer != 0 || fromHere != 2 || len(notes) != 0 {
		t.Errorf("after the server was refused: %d from the server, %d from here, told %q; want all from here, nothing said again", fromServer, fromHere, notes)
	}
}

// TestAJobsBuildServerSendsToItsLabHost: build.to_lab of a lab host's job
// says how the build server a run builds on reaches it, with the lab
// host's user, address and port unless it names others; never for a QEMU
// guest or with direct: false.
func TestAJobsBuildServerSendsToItsLabHost(t *testing.T) {
	job, err := configs.Load("../configs/testdata/valid-tolab.yaml", configs.LoadOptions{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := BuildOptions(job, nil).Server.(*BuildServer); !ok {
		t.Fatalf("the job's build server: %#v", BuildOptions(job, nil).Server)
	}
	if to := toLabOf(job); to == nil || to.Address != "10.1.0.7" || to.Port != 2222 || to.User != "root" || to.Identity != "~/.ssh/id_lab" || to.Lend || to.Timeout != 30*time.Second {
		t.Errorf("build.to_lab: %+v", to)
	}
	job, err = configs.Load("../configs/testdata/valid-tolab-agent.yaml", configs.LoadOptions{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if to := toLabOf(job); to == nil || to.Address != "rt1.lab.example.com" || to.Port != 22 || !to.Lend || to.Identity != "" {
		t.Errorf("build.to_lab with the defaults: %+v", to)
	}
	job.Build.ToLab.Direct = false
	if to := toLabOf(job); to != nil {
		t.Errorf("direct: false gives %+v", to)
	}
	job, err = configs.Load("../configs/testdata/valid-buildhost.yaml", configs.LoadOptions{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if job.Build.ToLab.Direct || toLabOf(job) != nil {
		t.Errorf("a QEMU job's build server sends to the guest: %+v", job.Build.ToLab)
	}
}

// closedPort is a port of 127.0.0.1 nothing listens on: a connection
// there is refused.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}
