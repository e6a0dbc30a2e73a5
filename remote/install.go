package remote

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"kbisect/internal/shell"
)

// Artifact is a built kernel to install: its release, its image and, when
// it has modules, what to install as /lib/modules/<release>: a tarball
// (what kbisect build makes) or a directory tree.
type Artifact struct {
	Release string
	Image   string
	Modules string
}

// LoadArtifact reads an artifact directory: kernel.release (the release),
// the image as bzImage, vmlinuz or Image, and optionally modules.tar or a
// modules/ tree (what goes into /lib/modules/<release>).
func LoadArtifact(dir string) (Artifact, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kernel.release"))
	if err != nil {
		return Artifact{}, fmt.Errorf("artifact %s: %v (an artifact has kernel.release, bzImage and maybe modules.tar)", dir, err)
	}
	a := Artifact{Release: strings.TrimSpace(string(data))}
	if err := checkRelease(a.Release); err != nil {
		return a, fmt.Errorf("artifact %s: kernel.release: %v", dir, err)
	}
	for _, name := range []string{"bzImage", "vmlinuz", "Image"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() {
			a.Image = filepath.Join(dir, name)
			break
		}
	}
	if a.Image == "" {
		return a, fmt.Errorf("artifact %s: no kernel image (bzImage, vmlinuz or Image)", dir)
	}
	if fi, err := os.Stat(filepath.Join(dir, "modules.tar")); err == nil && fi.Mode().IsRegular() {
		a.Modules = filepath.Join(dir, "modules.tar")
	} else if fi, err := os.Stat(filepath.Join(dir, "modules")); err == nil && fi.IsDir() {
		a.Modules = filepath.Join(dir, "modules")
	}
	return a, nil
}

// InstallOptions say how the host makes the initramfs and how many test
// kernels it keeps.
type InstallOptions struct {
	// Initramfs is none, update-initramfs, dracut, kernel-install, or a
	// command run with KBISECT_RELEASE set.
	Initramfs string
	// Keep is how many kbisect kernels stay installed (older ones are
	// removed, never the running one): /boot must not fill up overnight.
	Keep int
	// Env holds the ${NAME} values of an Initramfs command: they go to
	// the host with the install script.
	Env []string
	// Root prefixes every path on the host ("" for /): tests install
	// into a directory instead of the machine's /boot.
	Root string
	// Via, when set, sends the image and the modules from another
	// machine that holds them (a build server) rather than from here; a
	// copy that cannot be made so is a *ViaError, before anything on the
	// host changed but those files.
	Via *Via
}

// Install puts the artifact on the host: the image as
// /boot/vmlinuz-<release>, the modules under /lib/modules/<release>, both
// copied (from here, or opt.Via) with their checksums verified, then the
// initramfs step and the removal of old kbisect kernels.
func (h *Host) Install(ctx context.Context, art Artifact, opt InstallOptions) error {
	if err := checkRelease(art.Release); err != nil {
		return fmt.Errorf("install: %v", err)
	}
	root := strings.TrimSuffix(opt.Root, "/")
	stage := root + "/var/tmp/kbisect-stage/" + art.Release
	if opt.Via != nil {
		if err := h.placeVia(ctx, *opt.Via, art, stage, root+"/lib/modules/"+art.Release); err != nil {
			return err
		}
		if opt.Via.Placed != nil {
			opt.Via.Placed()
		}
	} else if _, err := h.Copy(ctx, art.Image, stage); err != nil {
		return err
	}
	if art.Modules != "" && opt.Via == nil {
		copyModules := h.Copy
		if strings.HasSuffix(art.Modules, ".tar") {
			copyModules = h.CopyTarball
		}
		if _, err := copyModules(ctx, art.Modules, root+"/lib/modules/"+art.Release); err != nil {
			return err
		}
	}
	rel := shell.Quote(art.Release)
	image := shell.Quote(stage + "/" + filepath.Base(art.Image))
	keep := opt.Keep
	if keep < 1 {
		keep = 3
	}
	script := fmt.Sprintf(`# kbisect:install %s
set -e
R=%s
mkdir -p "$R/boot"
install -m 0644 %s "$R/boot/vmlinuz-"%s
rm -rf %s
touch "$R/boot/.kbisect-"%s
%s
# Older kbisect kernels go, the newest kept, never the running one.
running=$(uname -r)
ls -t "$R"/boot/.kbisect-* 2>/dev/null | tail -n +%d | while read -r m; do
	r=${m##*/.kbisect-}
	[ "$r" = "$running" ] && continue
	rm -rf "$R/boot/vmlinuz-$r" "$R/boot/initrd.img-$r" "$R/boot/initramfs-$r.img" "$R/lib/modules/$r" "$m"
done
`, rel, shell.Quote(root), image, rel, shell.Quote(stage), rel, initramfsStep(opt.Initramfs, art.Release), keep+1)
	env := append([]string{"KBISECT_RELEASE=" + art.Release}, opt.Env...)
	if _, _, err := h.Run(ctx, shell.Cmd{Script: script, Env: env}); err != nil {
		return fmt.Errorf("install %s: %w", art.Release, err)
	}
	return nil
}

// initramfsStep is the shell line that makes the initramfs.
func initramfsStep(tool, release string) string {
	rel := shell.Quote(release)
	switch tool {
	case "", "none":
		return ": no initramfs"
	case "update-initramfs":
		return "update-initramfs -c -k " + rel
	case "dracut":
		return "dracut --force /boot/initramfs-" + rel + ".img " + rel
	case "kernel-install":
		return "kernel-install add " + rel + " /boot/vmlinuz-" + rel
	}
	return "(\n" + tool + "\n)" // the job's own command, with KBISECT_RELEASE
}
