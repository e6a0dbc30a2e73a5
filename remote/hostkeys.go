package remote

import (
	"errors"
	"fmt"
	"kbisect/internal/shell"
	"net"
	"os"
	"path/filepath"
	"strings"

	skeema "github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// HostKeyError is a host key that does not match known_hosts: unknown
// (never seen) or changed (another key than the one recorded). It says
// the fingerprint and the line that would accept it.
type HostKeyError struct {
	Host        string
	Fingerprint string
	Line        string // the known_hosts line for the key offered
	KnownHosts  string
	Changed     bool
	Want        []string // where the recorded keys are, for a changed key
}

func (e *HostKeyError) Error() string {
	if e.Changed {
		return fmt.Sprintf("%s: the host key CHANGED (%s), unlike %s: if the machine was reinstalled, check the new fingerprint with its owner, then remove the old line (ssh-keygen -f %s -R %s) and run the same command again; kbisect never accepts a changed key",
			e.Host, e.Fingerprint, strings.Join(e.Want, ", "), shell.Quote(e.KnownHosts), shell.Quote(knownhosts.Normalize(e.Host)))
	}
	return fmt.Sprintf("%s: unknown host key %s: check the fingerprint, then add this line to %s (or set host.accept_new_host_key):\n%s",
		e.Host, e.Fingerprint, e.KnownHosts, e.Line)
}

// unknownHostAlgorithms are asked of a host known_hosts does not list:
// ed25519 first, as OpenSSH does, so that the line an unknown host's error
// offers is the one ssh would add.
var unknownHostAlgorithms = []string{ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}

// hostKeyCallback verifies host keys against the known_hosts file; with
// AcceptNewHostKey it records a host not in it yet, never a changed key.
func hostKeyCallback(opt Options) (ssh.HostKeyCallback, []string, error) {
	file := opt.KnownHosts
	if file == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, nil, err
		}
		file = filepath.Join(home, ".ssh", "known_hosts")
	}
	var files []string
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		files = append(files, file)
	}
	// Without a file every host is unknown; the file is created only
	// when a key is accepted.
	check, err := knownhosts.New(files...)
	if err != nil {
		return nil, nil, err
	}
	// The handshake must ask for a key known_hosts can check: a host with
	// an ed25519 and an ECDSA key, known by its ed25519 key (OpenSSH's
	// default), would otherwise offer the ECDSA one and look changed.
	algos := skeema.HostKeyAlgorithms(check, opt.target())
	if len(algos) == 0 {
		algos = unknownHostAlgorithms
	}
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := check(hostname, remote, key)
		var ke *knownhosts.KeyError
		if !errors.As(err, &ke) {
			return err
		}
		line := knownhosts.Line([]string{knownhosts.Normalize(hostname)}, key)
		hk := &HostKeyError{Host: hostname, Fingerprint: ssh.FingerprintSHA256(key), Line: line, KnownHosts: file}
		if len(ke.Want) > 0 {
			hk.Changed = true
			for _, w := range ke.Want {
				hk.Want = append(hk.Want, fmt.Sprintf("%s:%d (%s)", w.Filename, w.Line, ssh.FingerprintSHA256(w.Key)))
			}
			return hk
		}
		if !opt.AcceptNewHostKey {
			return hk
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return fmt.Errorf("recording the new host key: %v", err)
		}
		f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("recording the new host key in %s: %v", file, err)
		}
		defer f.Close()
		if _, err := fmt.Fprintln(f, line); err != nil {
			return fmt.Errorf("recording the new host key in %s: %v", file, err)
		}
		return f.Sync()
	}, algos, nil
}
