package simhost

import (
	"context"
	"net"

	"golang.org/x/crypto/ssh"
)

func (h *Host) serve() {
	for {
		c, err := h.l.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		cfg, down, refuse, drop := h.cfg, h.down, h.refuse > 0, false
		switch {
		case refuse:
			h.refuse--
		case !down:
			h.conns[c] = true
			if h.dropNext > 0 {
				h.dropNext--
				drop = true
			}
		}
		h.mu.Unlock()
		if down || refuse {
			c.Close() // booting, or flaky: nothing answers
			continue
		}
		go h.handle(c, cfg, drop)
	}
}

// handle serves one connection; drop closes it when its first session
// opens.
func (h *Host) handle(c net.Conn, cfg *ssh.ServerConfig, drop bool) {
	defer func() {
		h.mu.Lock()
		delete(h.conns, c)
		h.mu.Unlock()
		c.Close()
	}()
	_, chans, reqs, err := ssh.NewServerConn(&stallConn{Conn: c, h: h}, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		if drop {
			return
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			return
		}
		go h.session(c, ch, chReqs)
	}
}

// session answers one session of connection c.
func (h *Host) session(c net.Conn, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	started := false
	for {
		select {
		case <-done:
			return
		case req, ok := <-reqs:
			if !ok {
				return
			}
			switch {
			case req.Type == "signal":
				cancel() // a signal ends what runs, as SIGTERM would
				_ = req.Reply(true, nil)
			case req.Type != "exec" || started:
				_ = req.Reply(req.Type == "env", nil)
			default:
				var p struct{ Command string }
				if err := ssh.Unmarshal(req.Payload, &p); err != nil {
					_ = req.Reply(false, nil)
					return
				}
				_ = req.Reply(true, nil)
				started = true
				go func() {
					defer close(done)
					code := h.exec(ctx, c, p.Command, ch, ch, ch.Stderr())
					if h.dropsCommand() {
						c.Close() // it ran; its exit status is lost with the connection
						return
					}
					_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
				}()
			}
		}
	}
}

func (h *Host) dropAll() {
	h.mu.Lock()
	conns := h.conns
	h.conns = map[net.Conn]bool{}
	h.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}
