package nightly

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestNightlyRunsOncePerMachine(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockNightly(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockNightly(dir); err == nil || !strings.Contains(err.Error(), "another kbisect nightly for this machine is running") ||
		!strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("a second nightly: %v", err)
	}
	unlock()
	unlock2, err := lockNightly(dir)
	if err != nil {
		t.Fatalf("after the first ended: %v", err)
	}
	unlock2()
}
