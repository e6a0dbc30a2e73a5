package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"kbisect/internal/shell"
)

// Options say how to reach a host over SSH: the job file's host section.
type Options struct {
	Address string
	Port    int
	User    string
	// Identity is a private key file; without it, the ssh-agent's keys
	// (SSH_AUTH_SOCK) are offered.
	Identity   string
	KnownHosts string
	// AcceptNewHostKey records the key of a host not yet in KnownHosts;
	// a changed key is refused whatever this says.
	AcceptNewHostKey bool
	// Jump is a bastion, [user@]host[:port], reached with the same keys.
	Jump string
	// Sudo runs every command through sudo -n, for a user who is not root.
	Sudo           bool
	ConnectTimeout time.Duration
	// Keepalive is how often a silent connection is probed; three probes
	// without an answer drop it. 0 turns probing off.
	Keepalive time.Duration
}

func (o Options) target() string {
	return net.JoinHostPort(o.Address, strconv.Itoa(o.port()))
}

func (o Options) port() int {
	if o.Port == 0 {
		return 22
	}
	return o.Port
}

// InfraError is a failure of the lab rather than of a kernel: the host is
// unreachable, refuses us, or the connection dropped. A bisection retries
// it and then stops; it is never a verdict.
type InfraError struct {
	Host string
	Op   string // "dial", "handshake", "run", "copy", …
	Err  error
}

func (e *InfraError) Error() string { return fmt.Sprintf("%s: %s: %v", e.Host, e.Op, e.Err) }
func (e *InfraError) Unwrap() error { return e.Err }

// Host is a connected lab machine. It satisfies shell.Runner.
type Host struct {
	opt    Options
	client *ssh.Client
	jump   *ssh.Client
	done   chan struct{}
	lost   error // why the keepalive gave up, under mu
	mu     sync.Mutex
	close  sync.Once
	agent  io.Closer // the ssh-agent connection, when keys come from it
	// key is the host key the handshake verified against known_hosts.
	key ssh.PublicKey
	// lend says the next session asks for agent forwarding (LendKeys):
	// sshd grants it once a connection, for all its sessions.
	lend bool
}

var _ shell.Runner = (*Host)(nil)

// Dial connects to the host: through the jump host if any, verifying every
// host key against known_hosts, within opt.ConnectTimeout (and ctx).
func Dial(ctx context.Context, opt Options) (*Host, error) {
	if opt.ConnectTimeout <= 0 {
		opt.ConnectTimeout = 30 * time.Second
	}
	auth, agentConn, err := authMethods(opt.Identity)
	if err != nil {
		return nil, &InfraError{Host: opt.target(), Op: "auth", Err: err}
	}
	h := &Host{opt: opt, done: make(chan struct{}), agent: agentConn}
	ok := false
	// Every way out but success closes what was opened: the jump host's
	// connection and the agent's.
	defer func() {
		if ok {
			return
		}
		if h.jump != nil {
			h.jump.Close()
		}
		if agentConn != nil {
			agentConn.Close()
		}
	}()
	var conn net.Conn
	if opt.Jump != "" {
		jopt, err := jumpOptions(opt)
		if err != nil {
			return nil, err
		}
		if h.jump, _, err = dialClient(ctx, jopt, auth, nil); err != nil {
			return nil, err
		}
		conn, err = dialThrough(ctx, h.jump, opt.target(), opt.ConnectTimeout)
		if err != nil {
			return nil, &InfraError{Host: opt.target(), Op: "dial through " + jopt.target(), Err: err}
		}
	}
	if h.client, h.key, err = dialClient(ctx, opt, auth, conn); err != nil {
		return nil, err
	}
	if opt.Keepalive > 0 {
		go h.keepalive()
	}
	if h.jump != nil {
		// The jump host's connection serves this one alone: it ends when
		// this one does (the keepalive gave up on the host, the link
		// dropped), not only at Close.
		go func() {
			_ = h.client.Wait()
			h.jump.Close()
		}()
	}
	ok = true
	return h, nil
}

// dialClient makes the TCP connection (unless conn is given) and the SSH
// handshake, both bounded by the connect timeout; it returns the host key
// it verified too.
func dialClient(ctx context.Context, opt Options, auth []ssh.AuthMethod, conn net.Conn) (*ssh.Client, ssh.PublicKey, error) {
	ctx, cancel := context.WithTimeout(ctx, opt.ConnectTimeout)
	defer cancel()
	target := opt.target()
	if conn == nil {
		var d net.Dialer
		var err error
		if conn, err = d.DialContext(ctx, "tcp", target); err != nil {
			return nil, nil, &InfraError{Host: target, Op: "dial", Err: err}
		}
	}
	hostKeys, algos, err := hostKeyCallback(opt)
	if err != nil {
		conn.Close()
		return nil, nil, &InfraError{Host: target, Op: "known_hosts", Err: err}
	}
	var verified ssh.PublicKey
	check := func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := hostKeys(hostname, remote, key)
		if err == nil {
			verified = key
		}
		return err
	}
	cfg := &ssh.ClientConfig{User: opt.User, Auth: auth, HostKeyCallback: check, HostKeyAlgorithms: algos, Timeout: opt.ConnectTimeout}
	// The handshake has no context of its own: a deadline on the
	// connection bounds it, and the context's end closes it.
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	c, chans, reqs, err := ssh.NewClientConn(conn, target, cfg)
	stop()
	if err != nil {
		conn.Close()
		var hk *HostKeyError
		if errors.As(err, &hk) {
			return nil, nil, hk
		}
		var ne net.Error
		switch {
		case errors.Is(ctx.Err(), context.Canceled):
			// The caller gave up (the search ended, the user pressed
			// ^C): no fault of the host's, and no timeout.
			err = ctx.Err()
		case ctx.Err() != nil, errors.As(err, &ne) && ne.Timeout():
			err = fmt.Errorf("no SSH handshake within %s", opt.ConnectTimeout)
		}
		return nil, nil, &InfraError{Host: target, Op: "handshake", Err: authHint(err, opt)}
	}
	_ = conn.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), verified, nil
}

// authHint says what to do when the host refused every key.
func authHint(err error, opt Options) error {
	if !strings.Contains(err.Error(), "unable to authenticate") {
		return err
	}
	how := "the ssh-agent's keys"
	if opt.Identity != "" {
		how = opt.Identity
	}
	return fmt.Errorf("%s@%s refused %s: add the public key to its ~/.ssh/authorized_keys (%v)", opt.User, opt.Address, how, err)
}

// dialThrough opens a TCP connection to target from the jump host,
// within timeout and ctx. A connection that comes after it gave up is
// closed as it comes.
func dialThrough(ctx context.Context, jump *ssh.Client, target string, timeout time.Duration) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := jump.Dial("tcp", target)
		ch <- result{c, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var err error
	select {
	case r := <-ch:
		return r.c, r.err
	case <-timer.C:
		err = fmt.Errorf("no connection within %s", timeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	go func() {
		if r := <-ch; r.c != nil {
			r.c.Close()
		}
	}()
	return nil, err
}

func jumpOptions(opt Options) (Options, error) {
	j := opt
	j.Jump, j.Sudo = "", false
	rest := opt.Jump
	if u, h, ok := strings.Cut(rest, "@"); ok {
		j.User, rest = u, h
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		host, port = rest, "22"
	}
	j.Address = host
	if j.Port, err = strconv.Atoi(port); err != nil {
		return j, &InfraError{Host: opt.Jump, Op: "jump", Err: fmt.Errorf("port %q", port)}
	}
	return j, nil
}

// authMethods offers the identity file's key, else the agent's keys (and
// the agent connection, to close with the host).
func authMethods(identity string) ([]ssh.AuthMethod, io.Closer, error) {
	if identity != "" {
		key, err := identityKey(identity)
		if err != nil {
			return nil, nil, err
		}
		signer, err := ssh.NewSignerFromKey(key)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", identity, err)
		}
		return []ssh.AuthMethod{ssh.PublicKeys(signer)}, nil, nil
	}
	conn, err := agentConn()
	if err != nil {
		return nil, nil, err
	}
	return []ssh.AuthMethod{ssh.PublicKeysCallback(agent.NewClient(conn).Signers)}, conn, nil
}

// identityKey reads the private key of host.identity.
func identityKey(identity string) (any, error) {
	pem, err := os.ReadFile(identity)
	if err != nil {
		return nil, err
	}
	key, err := ssh.ParseRawPrivateKey(pem)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return nil, fmt.Errorf("%s is protected by a passphrase: add it to ssh-agent (ssh-add %s) and leave host.identity out", identity, identity)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v", identity, err)
	}
	return key, nil
}

// agentConn connects to the ssh-agent of SSH_AUTH_SOCK.
func agentConn() (net.Conn, error) {
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return nil, fmt.Errorf("no host.identity and no ssh-agent (SSH_AUTH_SOCK is not set)")
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("ssh-agent at %s: %v", sock, err)
	}
	return conn, nil
}

// keepalive probes the connection; after three probes without an answer
// it closes the connection, which fails every running command with an
// InfraError.
func (h *Host) keepalive() {
	t := time.NewTicker(h.opt.Keepalive)
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-h.done:
			return
		case <-t.C:
		}
		reply := make(chan error, 1)
		go func() {
			_, _, err := h.client.SendRequest("keepalive@openssh.com", true, nil)
			reply <- err
		}()
		select {
		case err := <-reply:
			if err == nil {
				missed = 0
				continue
			}
			h.drop(fmt.Errorf("connection lost: %v", err))
			return
		case <-time.After(h.opt.Keepalive):
			if missed++; missed >= 3 {
				h.drop(fmt.Errorf("connection lost: no answer to %d keepalives %s apart", missed, h.opt.Keepalive))
				return
			}
		case <-h.done:
			return
		}
	}
}

func (h *Host) drop(why error) {
	h.mu.Lock()
	h.lost = why
	h.mu.Unlock()
	h.client.Close()
}

// Close closes the connection (and the jump host's, and the agent's);
// closing twice is harmless.
func (h *Host) Close() error {
	var err error
	h.close.Do(func() {
		close(h.done)
		err = h.client.Close()
		if h.jump != nil {
			h.jump.Close()
		}
		if h.agent != nil {
			h.agent.Close()
		}
	})
	return err
}

// Name is the host as user@address:port, for messages.
func (h *Host) Name() string { return h.opt.User + "@" + h.opt.target() }

// Run runs a shell script on the host with sh (through sudo -n when the
// host says so), the script and its environment sent on standard input so
// that no value appears on a command line. A non-zero exit is a
// *shell.ExitError, a dropped connection an *InfraError; when the context
// ends, the remote script gets SIGTERM and Run returns the context's error.
// A script that prints more than shell.MaxOutput on a stream is stopped
// the same way: a *shell.OutputError.
func (h *Host) Run(ctx context.Context, cmd shell.Cmd) ([]byte, []byte, error) {
	shell.Trace(ctx, h.Name(), cmd.Script)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stdout, stderr := shell.NewCapture("stdout", shell.MaxOutput, cancel), shell.NewCapture("stderr", shell.MaxOutput, cancel)
	err := h.session(runCtx, "run", h.shell(), scriptInput(cmd), stdout, stderr, stderr.String)
	if oe := shell.Overflow(stdout, stderr); oe != nil {
		err = oe
	}
	return stdout.Bytes(), stderr.Bytes(), err
}

// scriptInput is what Run sends the shell: cmd.Env exported, then the
// script.
func scriptInput(cmd shell.Cmd) *bytes.Buffer {
	var in bytes.Buffer
	for _, kv := range cmd.Env {
		name, value, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&in, "export %s=%s\n", name, shell.Quote(value))
	}
	// The script is read whole as a function before it runs, with its
	// standard input from /dev/null: a command in it that reads its
	// input must not swallow the rest of the script.
	in.WriteString("kbisect_script() {\n:\n")
	in.WriteString(cmd.Script)
	in.WriteString("\n}\nkbisect_script </dev/null\n")
	return &in
}

// shell is the remote command that reads a script from standard input.
func (h *Host) shell() string {
	if h.opt.Sudo {
		return "sudo -n sh -s"
	}
	return "sh -s"
}

// session runs one remote command with the given streams, bounded by ctx.
// stderrText is what stderr kept, for the error of a non-zero exit.
func (h *Host) session(ctx context.Context, op, command string, stdin io.Reader, stdout, stderr io.Writer, stderrText func() string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s, err := h.client.NewSession()
	if err != nil {
		return h.infra(op, err)
	}
	defer s.Close()
	s.Stdin, s.Stdout, s.Stderr = stdin, stdout, stderr
	h.mu.Lock()
	lend := h.lend
	h.lend = false
	h.mu.Unlock()
	if lend {
		if err := agent.RequestAgentForwarding(s); err != nil {
			return h.infra(op, fmt.Errorf("agent forwarding: %v", err))
		}
	}
	if err := s.Start(command); err != nil {
		return h.infra(op, err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = s.Signal(ssh.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			// Not every server passes signals on: close the channel and
			// leave what still runs there to the host.
			s.Close()
		}
		return ctx.Err()
	}
	var ee *ssh.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.Signal() == "":
		text := stderrText()
		if h.opt.Sudo && ee.ExitStatus() == 1 && strings.Contains(text, "sudo: a password is required") {
			return h.infra(op, fmt.Errorf("host.sudo needs passwordless sudo for %s (NOPASSWD in sudoers)", h.opt.User))
		}
		return &shell.ExitError{Code: ee.ExitStatus(), Stderr: text}
	case errors.As(err, &ee):
		return h.infra(op, fmt.Errorf("the remote command was killed by SIG%s", ee.Signal()))
	}
	return h.infra(op, err)
}

// infra wraps err as an InfraError, saying why the connection was lost
// when the keepalive knows.
func (h *Host) infra(op string, err error) error {
	h.mu.Lock()
	lost := h.lost
	h.mu.Unlock()
	if lost != nil {
		err = lost
	} else if errors.Is(err, io.EOF) || strings.Contains(err.Error(), "connection lost") {
		err = fmt.Errorf("connection lost (%v)", err)
	}
	return &InfraError{Host: h.Name(), Op: op, Err: err}
}
