package remote

import (
	"context"
	"testing"
	"time"

	"kbisect/internal/sshtest"
)

func options(s *sshtest.Server) Options {
	return Options{Address: "127.0.0.1", Port: s.Port, User: s.User, Identity: s.Identity, KnownHosts: s.KnownHosts,
		ConnectTimeout: 10 * time.Second, Keepalive: time.Second}
}

func dial(t *testing.T, opt Options) *Host {
	t.Helper()
	h, err := Dial(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}
