package kbuild

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needProgram returns the path of prog, or skips the test saying what to
// install; with require (KBISECT_REQUIRE_…=1, as CI sets) it fails instead:
// a test of a real daemon must not pass by not running.
func needProgram(t *testing.T, prog, pkg, require string) string {
	t.Helper()
	path, err := exec.LookPath(prog)
	if err == nil {
		return path
	}
	if os.Getenv(require) == "1" {
		t.Fatalf("%s is not installed and %s=1 (Debian: apt-get install %s)", prog, require, pkg)
	}
	t.Skipf("%s is not installed (Debian: apt-get install %s); %s=1 makes this a failure", prog, pkg, require)
	return ""
}

// freePort is a TCP port of 127.0.0.1 nobody listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// startDaemon runs a server in a process group of its own, its output in
// the file log, killed with its whole group when the test ends (failed or
// not), and waits until it accepts connections on port.
func startDaemon(t *testing.T, port, log string, stdin string, argv ...string) {
	t.Helper()
	out, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdout, c.Stderr = out, out
	if stdin != "" {
		c.Stdin = strings.NewReader(stdin)
	}
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		out.Close()
		t.Fatalf("%s: %v", argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		<-exited
		out.Close()
	})
	// Readiness, not a measurement: the bound only stops a daemon that
	// never listens from hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		conn, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			conn.Close()
			return
		}
		select {
		case err := <-exited:
			exited <- err
			b, _ := os.ReadFile(log)
			t.Fatalf("%s exited before it listened on %s: %v\n%s", filepath.Base(argv[0]), port, err, b)
		case <-ctx.Done():
			b, _ := os.ReadFile(log)
			t.Fatalf("%s never listened on %s\n%s", filepath.Base(argv[0]), port, b)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// redisCommand sends one command to a redis server and returns its
// integer reply (RESP ":<n>"), authenticating first when password is set.
func redisCommand(t *testing.T, port, password, command string) int {
	t.Helper()
	conn, err := net.Dial("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A bound on a server that never answers, not a measurement.
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(conn)
	reply := func(cmd string) string {
		fmt.Fprintf(conn, "%s\r\n", cmd)
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("redis: %v", err)
		}
		return strings.TrimRight(line, "\r\n")
	}
	if password != "" {
		if line := reply("AUTH " + password); line != "+OK" {
			t.Fatalf("redis AUTH: %q", line)
		}
	}
	line := reply(command)
	n, err := strconv.Atoi(strings.TrimPrefix(line, ":"))
	if !strings.HasPrefix(line, ":") || err != nil {
		t.Fatalf("redis %s: %q", command, line)
	}
	return n
}
