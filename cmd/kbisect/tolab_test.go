package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/internal/simlab"
	"kbisect/internal/sshtest"
)

// TestRunOnABuildServerThatSendsItsKernelsToTheLabHost: kbisect run on
// the simulated lab with its kernels built on a build server (a real
// sshd on 127.0.0.1, a real kbisect build there) that sends them to the
// lab host itself (build.to_lab): the planted commit is found, and every
// kernel the server built reached the host from the server.
func TestRunOnABuildServerThatSendsItsKernelsToTheLabHost(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 3, Commits: 60})
	home := t.TempDir()
	srv := sshtest.Start(t, "SetEnv HOME="+home)
	bin := filepath.Join(home, "kbisect")
	if out, err := exec.Command("go", "build", "-o", bin, "kbisect/cmd/kbisect").CombinedOutput(); err != nil {
		t.Fatalf("go build kbisect for the build server: %v\n%s", err, out)
	}
	clone := filepath.Join(home, "linux")
	if out, err := exec.Command("git", "clone", "-q", "--no-local", l.Tree.Dir, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone for the build server: %v\n%s", err, out)
	}
	job, err := os.ReadFile(l.JobFile)
	if err != nil {
		t.Fatal(err)
	}
	keys := fmt.Sprintf("build:\n  host: {address: 127.0.0.1, port: %d, user: %s, identity: %s, known_hosts: %s}\n  remote_tree: %s\n  host_kbisect: %s\n  to_lab: {address: 127.0.0.1, identity: %s}\n",
		srv.Port, srv.User, srv.Identity, srv.KnownHosts, clone, bin, l.Identity)
	text := strings.Replace(string(job), "\nbuild:\n", "\n"+keys, 1)
	if text == string(job) {
		t.Fatal("the lab's job has no build section")
	}
	if err := os.WriteFile(l.JobFile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI(t, context.Background(), "host", "check", "--job", l.JobFile)
	if code != exitOK || !strings.Contains(out+errOut, "the build server sends kernels to the lab host itself") {
		t.Errorf("host check: exit %d\n%s%s", code, out, errOut)
	}
	state := filepath.Join(t.TempDir(), "state")
	code, out, errOut = runCLI(t, context.Background(), "run", "--job", l.JobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", state)
	want := l.Tree.Expected.FirstBad
	if code != exitOK || !strings.HasPrefix(out, want+" is the first bad commit\n") {
		t.Fatalf("exit %d, want %s\nstdout:\n%s\nstderr:\n%s", code, want, out, errOut)
	}
	sent := strings.Count(errOut, "sent by the build server straight to the lab host")
	built := len(dirs(t, filepath.Join(home, ".cache", "kbisect", "build-cache", "artifacts")))
	if sent == 0 || built == 0 || strings.Contains(errOut, "through this controller") {
		t.Errorf("%d boots were sent by the server, which built %d kernels; the run said:\n%s", sent, built, errOut)
	}
	t.Logf("the server built %d kernels and sent %d boots' kernels to the lab host", built, sent)
}

// dirs are the directories in dir.
func dirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			out = append(out, e.Name())
		}
	}
	return out
}
