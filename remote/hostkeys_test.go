package remote

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func TestTheHandshakeAsksForTheKeyTypesKnownHostsHolds(t *testing.T) {
	pub := func(k any, err error) ssh.PublicKey {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		p, err := ssh.NewPublicKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	ed := pub(edPub, err)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecKey := pub(&ec.PublicKey, err)
	rs, err := rsa.GenerateKey(rand.Reader, 2048)
	rsaKey := pub(&rs.PublicKey, err)

	lab := Options{Address: "10.0.0.7", Port: 2222}
	file := filepath.Join(t.TempDir(), "known_hosts")
	lines := knownhosts.Line([]string{"[10.0.0.7]:2222"}, rsaKey) + "\n" +
		knownhosts.Line([]string{"10.0.0.8"}, ed) + "\n" +
		knownhosts.Line([]string{"[10.0.0.7]:2222"}, ecKey) + "\n"
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		opt   Options
		file  string
		algos []string
	}{
		{"a known host", lab, file, []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA, ssh.KeyAlgoECDSA256}},
		{"another port of a known address", Options{Address: "10.0.0.7", Port: 22}, file, unknownHostAlgorithms},
		{"no known_hosts file yet", lab, filepath.Join(t.TempDir(), "known_hosts"), unknownHostAlgorithms},
	} {
		c.opt.KnownHosts = c.file
		_, algos, err := hostKeyCallback(c.opt)
		if err != nil || !slices.Equal(algos, c.algos) {
			t.Errorf("%s: %q, %v; want %q", c.name, algos, err, c.algos)
		}
	}
	if unknownHostAlgorithms[0] != ssh.KeyAlgoED25519 {
		t.Errorf("an unknown host is asked for %s first, not ed25519 as OpenSSH does", unknownHostAlgorithms[0])
	}
}
