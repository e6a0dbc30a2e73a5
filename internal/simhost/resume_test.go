package simhost_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kbisect/internal/simhost"
	"kbisect/remote"
)

// A host started again from its directory is the same machine to a
// client: the same port, host key and identity, so the known_hosts line
// and the job written for it hold; it runs its default kernel again.
func TestAResumedHostKeepsItsIdentity(t *testing.T) {
	dir := t.TempDir()
	def := simhost.Kernel{Release: labKernel, Cmdline: "BOOT_IMAGE=/boot/vmlinuz-" + labKernel + " ro " + labParams}
	first, err := simhost.New(dir, def)
	if err != nil {
		t.Fatal(err)
	}
	line, port := first.KnownHostsLine, first.Port
	first.Close()

	again, err := simhost.Resume(dir, def)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.KnownHostsLine != line || again.Port != port {
		t.Fatalf("resumed as %q on %d, was %q on %d", again.KnownHostsLine, again.Port, line, port)
	}
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := dial(t, remote.Options{Address: "127.0.0.1", Port: port, User: "root", Identity: filepath.Join(dir, "id"), KnownHosts: kh, ConnectTimeout: 2 * time.Second})
	f, err := h.Facts(context.Background())
	if err != nil || f.Release != labKernel {
		t.Fatalf("the resumed host runs %q (%v), want %s", f.Release, err, labKernel)
	}

	// The port taken by another: the error says which and what to do.
	blocker, err := simhost.Resume(dir, def)
	if err == nil {
		blocker.Close()
		t.Fatal("a second host on the same port started")
	}
	if want := "listened on 127.0.0.1:"; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "free the port") {
		t.Fatalf("error %q does not name the port and the fix", err)
	}
	if _, err := simhost.Resume(t.TempDir(), def); err == nil || !strings.Contains(err.Error(), "holds no host to resume") {
		t.Fatalf("resuming an empty directory: %v", err)
	}
}
