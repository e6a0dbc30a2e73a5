package remote

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"kbisect/internal/shell"
)

// Via is another machine that holds an artifact's files too (a build
// server) and sends them to the host itself, over its own SSH client,
// instead of through this controller. The host's key it must find is the
// one this controller verified; what lands on the host is checked here
// against this controller's copy, as Copy checks its own.
type Via struct {
	// From is the connected machine that sends; Dir the artifact's
	// directory there, absolute or under the login's home.
	From *Host
	Dir  string
	// Address, Port and User are the host as From reaches it.
	Address string
	Port    int
	User    string
	// Identity is a private key file on From for the host ("": From's
	// own ssh set-up: its keys, its agent, the keys lent to it).
	Identity string
	// Timeout bounds From's connection to the host (0: 15s).
	Timeout time.Duration
	// Placed, when set, is called once the files are on the host, before
	// the install script runs: what lent From keys takes them back.
	Placed func()
}

// ViaError is a direct copy that did not happen; the artifact is then
// sent from here. Once says it is this artifact's alone (From no longer
// holds it, or holds another build of it): the next one may go direct.
// Passing says the connection failed in a way that may pass (refused,
// timed out, unreachable, dropped: a host rebooting, a network hiccup),
// not for a reason that stays (a refused key, another host key, a
// missing tool).
type ViaError struct {
	From    string
	Once    bool
	Passing bool
	Err     error
}

// passingSSH are the last words of OpenSSH's ssh (exit 255) on a
// connection that may work a moment later.
var passingSSH = []string{"Connection refused", "timed out", "No route to host", "Network is unreachable",
	"Connection reset", "Connection closed", "closed by remote host", "Broken pipe", "not responding"}

// sshMayPass says whether ssh's exit code and last line are a connection
// that may work a moment later.
func sshMayPass(code int, why string) bool {
	if code != 255 {
		return false
	}
	for _, p := range passingSSH {
		if strings.Contains(why, p) {
			return true
		}
	}
	return false
}

func (e *ViaError) Error() string { return fmt.Sprintf("the copy from %s: %v", e.From, e.Err) }
func (e *ViaError) Unwrap() error { return e.Err }

// viaAlias names the host in the known_hosts file From is given: its
// line holds the key this controller verified, whatever address From
// uses to reach the host.
const viaAlias = "kbisect-lab-host"

// KnownHostsLine is the host's verified key as a known_hosts line for
// name.
func (h *Host) KnownHostsLine(name string) (string, error) {
	key := h.key
	if c, ok := key.(*ssh.Certificate); ok {
		// Signed by a CA known_hosts trusts: the key it vouches for.
		key = c.Key
	}
	if key == nil {
		return "", fmt.Errorf("%s: no host key recorded", h.Name())
	}
	return knownhosts.Line([]string{name}, key), nil
}

// LendKeys forwards keys to the host as an ssh-agent (ssh -A), asked
// for by the next session and then the connection's: a program run there
// can sign with them while the connection lasts, never read them.
func (h *Host) LendKeys(keys agent.Agent) error {
	if err := agent.ForwardToAgent(h.client, signOnly{keys}); err != nil {
		return fmt.Errorf("%s: lending keys: %v", h.Name(), err)
	}
	h.mu.Lock()
	h.lend = true
	h.mu.Unlock()
	return nil
}

// signOnly serves an agent's keys to be listed and signed with, nothing
// more: the machine they are lent to cannot add, remove or lock keys.
type signOnly struct{ agent.Agent }

var errSignOnly = errors.New("kbisect lends keys to sign with, nothing more")

func (signOnly) Add(agent.AddedKey) error                 { return errSignOnly }
func (signOnly) Remove(ssh.PublicKey) error               { return errSignOnly }
func (signOnly) RemoveAll() error                         { return errSignOnly }
func (signOnly) Lock([]byte) error                        { return errSignOnly }
func (signOnly) Unlock([]byte) error                      { return errSignOnly }
func (signOnly) Signers() ([]ssh.Signer, error)           { return nil, errSignOnly }
func (signOnly) Extension(string, []byte) ([]byte, error) { return nil, agent.ErrExtensionUnsupported }

// SignWithFlags signs as the agent does (RSA keys sign with SHA-2 so).
func (a signOnly) SignWithFlags(key ssh.PublicKey, data []byte, flags agent.SignatureFlags) (*ssh.Signature, error) {
	if ea, ok := a.Agent.(agent.ExtendedAgent); ok {
		return ea.SignWithFlags(key, data, flags)
	}
	if flags == 0 {
		return a.Agent.Sign(key, data)
	}
	return nil, errors.New("the agent cannot sign with flags")
}

// LendableKeys are the keys Dial offers a host of identity: that key
// alone, else the ssh-agent's (with its connection, to close after).
func LendableKeys(identity string) (agent.Agent, io.Closer, error) {
	if identity != "" {
		key, err := identityKey(identity)
		if err != nil {
			return nil, nil, err
		}
		ring := agent.NewKeyring()
		if err := ring.Add(agent.AddedKey{PrivateKey: key}); err != nil {
			return nil, nil, fmt.Errorf("%s: %v", identity, err)
		}
		return ring, nil, nil
	}
	conn, err := agentConn()
	if err != nil {
		return nil, nil, err
	}
	return agent.NewClient(conn), conn, nil
}

// placeVia has v.From send the artifact's image into stage and its
// modules tarball into modules on the host. The image and modules.tar
// must be there as they are here.
func (h *Host) placeVia(ctx context.Context, v Via, art Artifact, stage, modules string) error {
	if art.Modules != "" && !strings.HasSuffix(art.Modules, ".tar") {
		return &ViaError{From: v.From.Name(), Once: true, Err: errors.New("the modules are a tree here, not modules.tar")}
	}
	f, err := os.Open(art.Image)
	if err != nil {
		return err
	}
	name, sums := filepath.Base(art.Image), map[string]string{}
	err = sendFile(io.Discard, f, name, sums, &CopyStats{})
	f.Close()
	if err != nil {
		return err
	}
	if err := h.sendVia(ctx, v, name, sums["./"+name], false, stage, sums); err != nil {
		return err
	}
	if art.Modules == "" {
		return nil
	}
	// One read of the tarball sums it whole and each file in it.
	if f, err = os.Open(art.Modules); err != nil {
		return err
	}
	defer f.Close()
	whole := sha256.New()
	r := io.TeeReader(f, whole)
	sums = map[string]string{}
	if err := retar(io.Discard, r, sums, &CopyStats{}); err != nil {
		return fmt.Errorf("%s: %v", art.Modules, err)
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	return h.sendVia(ctx, v, filepath.Base(art.Modules), hex.EncodeToString(whole.Sum(nil)), true, modules, sums)
}

// Exit codes of the sender's script: the kernel is not there as this
// controller has it (that kernel alone goes through here), or the sender
// lacks a tool.
const (
	viaNotThere = 93
	viaNoTool   = 94
)

// viaTools checks, from the login's home, that the sender has what a copy
// runs there.
const viaTools = `cd "$HOME" || exit 94
for t in ssh sha256sum tar mktemp cut; do command -v "$t" >/dev/null 2>&1 || { echo "kbisect: no $t there (apt-get install openssh-client coreutils tar)" >&2; exit 94; }; done
`

// viaScript runs on the sender: it checks that the file (a path under
// the login's home, or absolute) is the one this controller has, then
// pipes it (a tar of it, or the tarball itself) to the host's command
// over ssh (viaSSH).
const viaScript = viaTools + `[ -f %[1]s ] || { echo "kbisect: "%[1]s" is not there (the server did not build this kernel, or its cache let it go)" >&2; exit 93; }
[ "$(sha256sum <%[1]s | cut -c1-64)" = "$KBISECT_SUM" ] || { echo "kbisect: "%[1]s" there is not this controller's (another build of the same kernel)" >&2; exit 93; }
%[2]s | %[3]s
`

// viaSSH is the sender's ssh to the host, which runs the host's command
// ($KBISECT_HOST_COMMAND) and verifies the host's key against the single
// known_hosts line it is given ($KBISECT_HOST_KEY) and nothing else, on a
// connection of its own (a master connection of the sender's config
// would skip that), forwarding nothing, never asking anything, whatever
// the sender's ssh config says.
func viaSSH(v Via) string {
	q := shell.Quote
	identity := ""
	if v.Identity != "" {
		identity = "-i " + q(v.Identity) + " -o IdentitiesOnly=yes "
	}
	timeout := max(v.Timeout, time.Second)
	if v.Timeout <= 0 {
		timeout = 15 * time.Second
	}
	port := v.Port
	if port == 0 {
		port = 22
	}
	return fmt.Sprintf(`{ kh=$(mktemp) || exit 94
trap 'rm -f "$kh"' EXIT
printf '%%s\n' "$KBISECT_HOST_KEY" >"$kh"
ssh -T -a -x -o IgnoreUnknown=KnownHostsCommand,StdinNull,ForkAfterAuthentication -o BatchMode=yes -o StrictHostKeyChecking=yes -o "UserKnownHostsFile=\"$kh\"" -o GlobalKnownHostsFile=/dev/null -o KnownHostsCommand=none -o VerifyHostKeyDNS=no -o CheckHostIP=no -o HostKeyAlias=%s -o UpdateHostKeys=no -o ControlMaster=no -o ControlPath=none -o ClearAllForwardings=yes -o PermitLocalCommand=no -o RemoteCommand=none -o StdinNull=no -o ForkAfterAuthentication=no -o ConnectTimeout=%d -o ServerAliveInterval=15 -o ServerAliveCountMax=3 %s-p %d -l %s -- %s "$KBISECT_HOST_COMMAND"; }`,
		viaAlias, int(timeout.Seconds()), identity, port, q(v.User), q(v.Address))
}

// ProbeVia checks that v.From reaches the host as a copy would (its key,
// its sign-in, sudo there) by running true there: nil, or a *ViaError
// saying why not.
func (h *Host) ProbeVia(ctx context.Context, v Via) error {
	_, err := h.runVia(ctx, v, "probe", viaTools+viaSSH(v)+" </dev/null", h.shCommand("true"), "")
	return err
}

// sendVia sends one file of the artifact from v.From into dir on the
// host (unpacked when it is a tarball) and checks every file that landed
// against sums.
func (h *Host) sendVia(ctx context.Context, v Via, file, sum string, tarball bool, dir string, sums map[string]string) error {
	q := shell.Quote
	path := strings.TrimSuffix(v.Dir, "/") + "/" + file
	produce := "tar -cf - -C " + q(v.Dir) + " " + q(file)
	if tarball {
		produce = "cat " + q(path)
	}
	script := fmt.Sprintf(viaScript, q(path), produce, viaSSH(v))
	// The host runs what Copy would have it run, under sudo the same.
	onHost := h.shCommand("set -e; mkdir -p " + q(dir) + "; tar -xf - -C " + q(dir) + " --no-same-owner; cd " + q(dir) + " && find . -type f -exec sha256sum {} +")
	out, err := h.runVia(ctx, v, file, script, onHost, sum)
	if err != nil {
		return err
	}
	if err := compareSums(sums, string(out)); err != nil {
		return &ViaError{From: v.From.Name(), Err: fmt.Errorf("%s → %s on %s: %v", file, dir, h.Name(), err)}
	}
	return nil
}

// runVia runs script on v.From with the host's verified key, its command
// and the file's sum in the environment; what failed is a *ViaError
// naming what (the file, or the probe).
func (h *Host) runVia(ctx context.Context, v Via, what, script, onHost, sum string) ([]byte, error) {
	line, err := h.KnownHostsLine(viaAlias)
	if err != nil {
		return nil, &ViaError{From: v.From.Name(), Err: err}
	}
	cmd := shell.Cmd{Script: script, Env: []string{"KBISECT_SUM=" + sum, "KBISECT_HOST_KEY=" + line, "KBISECT_HOST_COMMAND=" + onHost}}
	out, _, err := v.From.Run(ctx, cmd)
	var ee *shell.ExitError
	switch {
	case err == nil:
		return out, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.As(err, &ee):
		// ssh's own word is its last line (a changed key's comes after
		// a banner of warnings).
		lines := strings.Split(strings.TrimSpace(ee.Stderr), "\n")
		why := strings.TrimSpace(lines[len(lines)-1])
		if why == "" {
			why = "exit status " + strconv.Itoa(ee.Code)
		}
		return nil, &ViaError{From: v.From.Name(), Once: ee.Code == viaNotThere, Passing: sshMayPass(ee.Code, why),
			Err: fmt.Errorf("%s to %s@%s: %s", what, v.User, v.Address, why)}
	}
	// The connection to From itself failed.
	return nil, &ViaError{From: v.From.Name(), Passing: MayBeRebooting(err), Err: err}
}
