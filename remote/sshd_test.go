package remote

import (
	"context"
	"testing"
	"time"

	"kbisect/internal/shell"
	"kbisect/internal/sshtest"
)

func options(s *sshtest.Server) Options {
	return Options{Address: "127.0.0.1", Port: s.Port, User: s.User, Identity: s.Identity, KnownHosts: s.KnownHosts,
		ConnectTimeout: 10 * time.Second, Keepalive: time.Second}
}

func dial(t testing.TB, opt Options) *Host {
	t.Helper()
	h, err := Dial(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// runAsync runs script on h while the test breaks the connection under it;
// the channel gets what Run returned.
func runAsync(h *Host, script string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, _, err := h.Run(context.Background(), shell.Cmd{Script: script})
		done <- err
	}()
	return done
}
