package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/internal/simhost"
	"kbisect/internal/simlab"
)

// TestRunOnABuildServerThatSendsItsKernelsToTheLabHost: kbisect run on
// the simulated lab with its kernels built on a build server (a real
// sshd on 127.0.0.1, a real kbisect build there) that sends them to the
// lab host itself (build.to_lab): the planted commit is found, and every
// kernel the server built reached the host from the server.
func TestRunOnABuildServerThatSendsItsKernelsToTheLabHost(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 3, Commits: 60})
	home := e2eBuildServer(t, l.JobFile, l.Tree.Dir, fmt.Sprintf("  to_lab: {address: 127.0.0.1, identity: %s}\n", l.Identity))

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

// TestTwoMachinesGetTheirKernelsFromTheBuildServer: with two identical
// machines (git's search, one job file each, the same build section) the
// server sends each machine's kernels to that machine, signing in with
// the key of that machine's job lent to it.
func TestTwoMachinesGetTheirKernelsFromTheBuildServer(t *testing.T) {
	l := simLab(t, simlab.Options{Seed: 2, Commits: 60})
	second, _, err := l.AddHost()
	if err != nil {
		t.Fatal(err)
	}
	lend := "  to_lab: {forward_agent: true}\n"
	e2eBuildServer(t, l.JobFile, l.Tree.Dir, lend)
	// The same build section in the second machine's job.
	first, err := os.ReadFile(l.JobFile)
	if err != nil {
		t.Fatal(err)
	}
	build := string(first[strings.Index(string(first), "\nbuild:\n"):strings.Index(string(first), "\nworkload:\n")])
	job, err := os.ReadFile(second)
	if err != nil {
		t.Fatal(err)
	}
	text := string(job)
	text = text[:strings.Index(text, "\nbuild:\n")] + build + text[strings.Index(text, "\nworkload:\n"):]
	if err := os.WriteFile(second, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, context.Background(), "run", "--job", l.JobFile, "--job", second,
		"--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", filepath.Join(t.TempDir(), "state"))
	if code != exitOK || !strings.HasPrefix(out, l.Tree.Expected.FirstBad+" is the first bad commit") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(errOut, "through this controller") {
		t.Errorf("a kernel went through this controller:\n%s", errOut)
	}
	for _, name := range []string{"simlab: ", "simlab-2: "} {
		n := 0
		for _, line := range strings.Split(errOut, "\n") {
			if strings.Contains(line, " "+name) && strings.HasSuffix(line, "boot: sent by the build server straight to the lab host") {
				n++
			}
		}
		if n == 0 {
			t.Errorf("no kernel of %q was sent by the build server:\n%s", name, errOut)
		}
	}
	for i, h := range append([]*simhost.Host{l.Host}, l.Hosts...) {
		if len(h.Boots()) == 0 {
			t.Errorf("machine %d never booted a kernel", i+1)
		}
	}
}
