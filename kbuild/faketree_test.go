package kbuild

import (
	"testing"

	"kbisect/internal/simlab"
)

// fakeTree is simlab.FakeTree: the simulated lab's build system and
// three C files, one commit per entry of changes.
func fakeTree(t *testing.T, changes ...map[string]string) (string, []string) {
	t.Helper()
	return simlab.FakeTree(t, changes...)
}
