package nightly

import (
	"path/filepath"
	"testing"
)

// TestRemoteName: the history names a remote without its credentials,
// and a local path whatever directory nightly ran in.
func TestRemoteName(t *testing.T) {
	abs, err := filepath.Abs("stable.git")
	if err != nil {
		t.Fatal(err)
	}
	for remote, want := range map[string]string{
		"https://user:token@git.example.org/stable/linux.git": "https://git.example.org/stable/linux.git",
		"git@git.example.org:stable/linux.git":                "git@git.example.org:stable/linux.git",
		"/srv/git/stable.git":                                 "/srv/git/stable.git",
		"stable.git":                                          abs,
		"./stable.git":                                        abs,
	} {
		if got := remoteName(remote); got != want {
			t.Errorf("%s: %s, want %s", remote, got, want)
		}
	}
}
