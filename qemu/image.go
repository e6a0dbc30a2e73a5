package qemu

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Image is the guest's root file system and the SSH keys that reach it,
// made once by BuildImage and kept in Dir.
type Image struct {
	Dir string
}

// DefaultImageDir is where kbisect lab image keeps the image:
// $XDG_CACHE_HOME/kbisect/lab, or ~/.cache/kbisect/lab.
func DefaultImageDir() string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "kbisect", "lab")
}

// RootFS is the raw ext4 image; Key the private key root logs in with;
// HostKey the guest's public host key, for known_hosts.
func (im Image) RootFS() string  { return filepath.Join(im.Dir, "rootfs.img") }
func (im Image) Key() string     { return filepath.Join(im.Dir, "id_ed25519") }
func (im Image) HostKey() string { return filepath.Join(im.Dir, "ssh_host_ed25519_key.pub") }

// Check says what is missing from the image directory, and what to do.
func (im Image) Check() error {
	for _, f := range []string{im.RootFS(), im.Key(), im.HostKey()} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("the QEMU lab image is not in %s (%s is missing): make it with kbisect lab image", im.Dir, filepath.Base(f))
		}
	}
	return nil
}

// KnownHosts writes a known_hosts file that names the guest's host key
// at 127.0.0.1:port.
func (im Image) KnownHosts(path string, port int) error {
	key, err := os.ReadFile(im.HostKey())
	if err != nil {
		return err
	}
	fields := strings.Fields(string(key))
	if len(fields) < 2 {
		return fmt.Errorf("%s: not a public key", im.HostKey())
	}
	line := fmt.Sprintf("[127.0.0.1]:%d %s %s\n", port, fields[0], fields[1])
	return os.WriteFile(path, []byte(line), 0o644)
}

// initScript is the guest's PID 1: Debian's minbase has no init. It
// mounts what the workloads read (proc, sys, tracefs), starts sshd, and
// reaps what is left to it.
const initScript = `#!/bin/sh
# kbisect lab guest: PID 1. Mounts, sshd, and nothing else.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /run
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /run
mkdir -p /run/sshd /sys/kernel/tracing
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t tmpfs tmpfs /tmp
hostname kbisect-lab
# QEMU's user network, set here: the kernel under test may lack IP_PNP.
busybox ip link set lo up
busybox ip link set eth0 up
busybox ip addr add 10.0.2.15/24 dev eth0
busybox ip route add default via 10.0.2.2
/usr/sbin/sshd -E /run/sshd.log && echo "kbisect-lab: sshd started"
while :; do
	wait
	sleep 1
done
`

// Packages are what the guest needs beyond minbase.
var Packages = []string{"openssh-server", "rt-tests", "rtla", "kexec-tools", "busybox-static", "procps"}

// BuildImage makes the image in dir: Debian (suite, e.g. bookworm) minbase
// with Packages by debootstrap, the init, a root login key and a host key
// of its own, as a raw ext4 file of size bytes. Progress goes to w.
func BuildImage(ctx context.Context, dir, suite, mirror string, size int64, w io.Writer) error {
	for _, tool := range []string{"debootstrap", "mkfs.ext4", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("kbisect lab image needs %s (Debian: apt-get install debootstrap e2fsprogs openssh-client qemu-system-x86)", tool)
		}
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("kbisect lab image runs debootstrap, which needs root")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	im := Image{Dir: dir}
	root := filepath.Join(dir, "rootfs.tmp")
	_ = os.RemoveAll(root)
	defer os.RemoveAll(root)
	run := func(name string, args ...string) error {
		start := time.Now()
		fmt.Fprintf(w, "+ %s %s\n", name, strings.Join(args, " "))
		c := exec.CommandContext(ctx, name, args...)
		c.Stdout, c.Stderr = w, w
		if err := c.Run(); err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		fmt.Fprintf(w, "  (%.1fs)\n", time.Since(start).Seconds())
		return nil
	}
	args := []string{"--variant=minbase", "--include=" + strings.Join(Packages, ","), suite, root}
	if mirror != "" {
		args = append(args, mirror)
	}
	if err := run("debootstrap", args...); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "sbin", "kbisect-init"), []byte(initScript), 0o755); err != nil {
		return err
	}
	// Keys: made here, so the host key is known before the first boot.
	for _, f := range []string{im.Key(), im.Key() + ".pub", filepath.Join(dir, "ssh_host_ed25519_key"), im.HostKey()} {
		_ = os.Remove(f)
	}
	if err := run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kbisect-lab", "-f", im.Key()); err != nil {
		return err
	}
	if err := run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kbisect-lab-host", "-f", filepath.Join(dir, "ssh_host_ed25519_key")); err != nil {
		return err
	}
	sshDir := filepath.Join(root, "etc", "ssh")
	old, _ := filepath.Glob(filepath.Join(sshDir, "ssh_host_*"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	for _, f := range []string{"ssh_host_ed25519_key", "ssh_host_ed25519_key.pub"} {
		if err := copyFile(filepath.Join(dir, f), filepath.Join(sshDir, f), 0o600); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "root", ".ssh"), 0o700); err != nil {
		return err
	}
	if err := copyFile(im.Key()+".pub", filepath.Join(root, "root", ".ssh", "authorized_keys"), 0o600); err != nil {
		return err
	}
	conf := "HostKey /etc/ssh/ssh_host_ed25519_key\nPermitRootLogin prohibit-password\nUseDNS no\n"
	if err := os.WriteFile(filepath.Join(sshDir, "sshd_config.d", "kbisect.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	tmp := im.RootFS() + ".tmp"
	_ = os.Remove(tmp)
	// Inode tables and journal zeroed now: ext4's lazy init would do it
	// in the guest's first minutes, beside the measurement.
	if err := run("mkfs.ext4", "-q", "-F", "-L", "kbisect-root", "-E", "lazy_itable_init=0,lazy_journal_init=0", "-d", root, tmp, fmt.Sprintf("%dM", size>>20)); err != nil {
		return err
	}
	return os.Rename(tmp, im.RootFS())
}

func copyFile(from, to string, mode os.FileMode) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, mode)
}
