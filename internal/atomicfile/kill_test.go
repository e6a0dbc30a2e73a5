package atomicfile

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// payloads are what the killed writer writes in turn: each is whole or
// not there.
func payloads() [2][]byte {
	return [2][]byte{bytes.Repeat([]byte("a"), 4<<20), bytes.Repeat([]byte("b"), 4<<20)}
}

// TestWriterChild is the process TestAKilledWriterLeavesAWholeFile kills:
// it writes into KBISECT_ATOMICFILE_CHILD until killed.
func TestWriterChild(t *testing.T) {
	dir := os.Getenv("KBISECT_ATOMICFILE_CHILD")
	if dir == "" {
		t.Skip("run by TestAKilledWriterLeavesAWholeFile")
	}
	p := payloads()
	for i := 0; ; i++ {
		if err := WriteFile(filepath.Join(dir, "evidence.json"), p[i%2]); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			os.Stdout.WriteString("writing\n") // the killer waits for it
		}
	}
}

// A writer killed with SIGKILL at random leaves the file whole, and the
// temporary file it may leave is swept, and only it.
func TestAKilledWriterLeavesAWholeFile(t *testing.T) {
	dir := t.TempDir()
	for _, keep := range []string{".git", ".evidence.json", "evidence.json.tmp"} {
		if err := os.WriteFile(filepath.Join(dir, keep), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	p := payloads()
	left := 0
	for kill := 0; kill < 40 && left < 3; kill++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWriterChild$")
		cmd.Env = append(os.Environ(), "KBISECT_ATOMICFILE_CHILD="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Killed mid-write, at a random point of one.
		if line, err := bufio.NewReader(out).ReadString('\n'); line != "writing\n" {
			t.Fatalf("the writer said %q: %v", line, err)
		}
		time.Sleep(time.Duration(rng.IntN(30000)) * time.Microsecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if b, err := os.ReadFile(filepath.Join(dir, "evidence.json")); err == nil && !bytes.Equal(b, p[0]) && !bytes.Equal(b, p[1]) {
			t.Fatalf("after kill %d the file holds %d bytes, neither payload", kill, len(b))
		}
		n, err := Sweep(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		left += n
	}
	if left == 0 {
		t.Fatal("no kill left a temporary file to sweep: the test kills too late or too early")
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != ".evidence.json .git evidence.json evidence.json.tmp" {
		t.Errorf("after sweeping: %q", names)
	}
}

// Without the lock, only a temporary file older than any write is swept.
func TestSweepSparesAWriteUnderWay(t *testing.T) {
	dir := t.TempDir()
	tmp, err := os.CreateTemp(dir, ".calibration.json"+tmpMark+"*")
	if err != nil {
		t.Fatal(err)
	}
	tmp.Close()
	if n, err := Sweep(dir, time.Minute); n != 0 || err != nil {
		t.Fatalf("a fresh temporary file: swept %d, %v", n, err)
	}
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(tmp.Name(), old, old); err != nil {
		t.Fatal(err)
	}
	if n, err := Sweep(dir, time.Minute); n != 1 || err != nil {
		t.Fatalf("an old temporary file: swept %d, %v", n, err)
	}
}
