package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/configs"
	"kbisect/internal/sshtest"
)

// e2eOnBuildServer says the QEMU end-to-end run builds its kernels on a
// build server (KBISECT_E2E_BUILD_HOST=1, just e2e-qemu-buildhost): a
// second sshd on 127.0.0.1 with its own host key.
func e2eOnBuildServer() bool { return os.Getenv("KBISECT_E2E_BUILD_HOST") != "" }

// e2eBuildServer starts the build server of an end-to-end run: a real
// sshd whose sessions' $HOME is a directory of the test's, holding a
// clone of tree's first commit alone (the series goes there as packs),
// and a kbisect built for it (the test binary is not one). It adds
// build.host, remote_tree and host_kbisect to the job file, and the more
// build keys given (lines indented by two), and returns the server's
// $HOME.
func e2eBuildServer(t *testing.T, job, tree string, more ...string) string {
	t.Helper()
	home := t.TempDir()
	srv := sshtest.Start(t, "SetEnv HOME="+home)
	bin := filepath.Join(home, "kbisect")
	if out, err := exec.Command("go", "build", "-o", bin, "kbisect/cmd/kbisect").CombinedOutput(); err != nil {
		t.Fatalf("go build kbisect for the build server: %v\n%s", err, out)
	}
	clone := filepath.Join(home, "linux")
	if out, err := exec.Command("git", "clone", "-q", "--no-local", "--single-branch", tree, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone for the build server: %v\n%s", err, out)
	}
	data, err := os.ReadFile(job)
	if err != nil {
		t.Fatal(err)
	}
	keys := fmt.Sprintf("build:\n  host: {address: 127.0.0.1, port: %d, user: %s, identity: %s, known_hosts: %s}\n  remote_tree: %s\n  host_kbisect: %s\n",
		srv.Port, srv.User, srv.Identity, srv.KnownHosts, clone, bin)
	text := strings.Replace(string(data), "build:\n", keys+strings.Join(more, ""), 1)
	writeFile(t, job, text)
	if _, err := configs.Open(job, os.Stderr); err != nil {
		t.Fatalf("the job with its build server: %v", err)
	}
	return home
}
