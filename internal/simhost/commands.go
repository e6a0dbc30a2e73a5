package simhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"

	"kbisect/configs"
)

var (
	cmdlineArg = regexp.MustCompile(`(?m)^KBISECT_CMDLINE='((?:[^']|'\\'')*)'`)
	exportLine = regexp.MustCompile(`(?m)^export ([A-Za-z_][A-Za-z0-9_]*)=(.*)$`)
)

// exec answers one remote command of connection c as a lab host would.
func (h *Host) exec(ctx context.Context, c net.Conn, command string, stdin io.Reader, stdout, stderr io.Writer) int {
	if strings.HasPrefix(command, "sh -c ") && strings.Contains(command, "tar -xf -") {
		return h.untar(command, stdin, stdout, stderr)
	}
	h.mu.Lock()
	sudoPass := h.sudoPass
	h.mu.Unlock()
	if strings.HasPrefix(command, "sudo -n ") && sudoPass {
		fmt.Fprintln(stderr, "sudo: a password is required")
		return 1
	}
	if command != "sh -s" && command != "sudo -n sh -s" {
		return h.shell(ctx, command, stdout, stderr)
	}
	data, _ := io.ReadAll(stdin)
	script := string(data)
	env := map[string]string{}
	for _, m := range exportLine.FindAllStringSubmatch(script, -1) {
		env[m[1]] = strings.Trim(m[2], "'")
	}
	op := ""
	for _, line := range strings.Split(script, "\n") {
		if rest, ok := strings.CutPrefix(line, "# kbisect:"); ok {
			op = rest
			break
		}
	}
	name, arg, _ := strings.Cut(op, " ")
	switch name {
	case "facts":
		h.mu.Lock()
		k, id := h.running, h.bootID
		h.mu.Unlock()
		iso, nohz := isolation(k.Cmdline)
		fmt.Fprintf(stdout, "%s\n%s\n%s\n%s\n%s\n%s\n", k.Release, k.Version, id, k.Cmdline, iso, nohz)
		return 0
	case "config":
		k := h.Running()
		if k.Config == "" {
			fmt.Fprintf(stderr, "the running kernel %s has neither /proc/config.gz (CONFIG_IKCONFIG_PROC) nor /boot/config-%s\n", k.Release, k.Release)
			return 3
		}
		fmt.Fprintf(stdout, "%s\n%s", k.Release, k.Config)
		return 0
	case "own-cmdline":
		return h.ownCmdline(stdout, stderr)
	case "install":
		h.mu.Lock()
		h.installed[arg] = true
		h.mu.Unlock()
		return 0
	case "kexec", "grub":
		m := cmdlineArg.FindStringSubmatch(script)
		if !h.Installed(arg) || m == nil {
			fmt.Fprintf(stderr, "Cannot open `/boot/vmlinuz-%s': No such file or directory\n", arg)
			if name == "kexec" {
				return exitKexecLab
			}
			return 1
		}
		if name == "kexec" {
			h.mu.Lock()
			f := h.faultOf(arg)
			h.mu.Unlock()
			switch f {
			case FaultKexecRejected:
				fmt.Fprintln(stderr, "kexec_load failed: Invalid argument")
				return exitKexecRejected
			case FaultKexecNoMemory:
				fmt.Fprintln(stderr, "kexec_load failed: Cannot allocate memory")
				return exitKexecLab
			}
		}
		cmdline := strings.ReplaceAll(m[1], `'\''`, "'")
		go h.reboot(Kernel{Release: arg, Version: "#1 SMP PREEMPT_RT " + time.Now().Format("Mon Jan 2 15:04:05 MST 2006"), Cmdline: cmdline, Noise: h.level(arg)})
		return 0
	case "script":
		// The job's script boots with the command line it is given.
		rel := env["KBISECT_RELEASE"]
		go h.reboot(Kernel{Release: rel, Version: "#1 SMP PREEMPT_RT", Cmdline: env["KBISECT_CMDLINE"], Noise: h.level(rel)})
		return 0
	case "osnoise":
		return h.osnoise(script, c, stdout, stderr)
	case "preflight":
		return h.preflight(arg, stdout)
	}
	return h.shell(ctx, script, stdout, stderr)
}

// ownCmdline answers remote's own-cmdline script: on a kernel kbisect did
// not install, its command line (recorded on the host); on one it did,
// the record, or exit 3 without one.
func (h *Host) ownCmdline(stdout, stderr io.Writer) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := h.running
	if h.installed[k.Release] || strings.Contains(k.Release, "-kbisect-") {
		if h.ownRecord == nil {
			fmt.Fprintf(stderr, "it runs %s, a test kernel kbisect installed, and holds no record of its own kernel's command line (/var/lib/kbisect/own-cmdline)\n", k.Release)
			return 3
		}
		fmt.Fprintf(stdout, "host-record\n%s\n%s\n%s\n", k.Release, h.ownRecord.Release, h.ownRecord.Cmdline)
		return 0
	}
	h.ownRecord = &Kernel{Release: k.Release, Cmdline: k.Cmdline}
	fmt.Fprintf(stdout, "running\n%s\n%s\n%s\n", k.Release, k.Release, k.Cmdline)
	return 0
}

// shell runs any other script with this machine's sh: the emulated host's
// user space is the test machine's.
func (h *Host) shell(ctx context.Context, script string, stdout, stderr io.Writer) int {
	c := exec.CommandContext(ctx, "/bin/sh", "-s")
	c.Stdin, c.Stdout, c.Stderr = strings.NewReader(script), stdout, stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGTERM) }
	c.WaitDelay = 2 * time.Second
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode()
	case errors.As(err, &ee):
		return 143 // killed by the signal
	}
	fmt.Fprintf(stderr, "simhost: %v\n", err)
	return 126
}

// isolation is what /sys/devices/system/cpu/isolated and nohz_full say for
// a command line.
func isolation(cmdline string) (string, string) {
	bp, err := configs.ParseBootParams(cmdline, 0)
	if err != nil {
		return "", ""
	}
	return bp.Domain().String(), bp.Tickless().String()
}

// level is the noise level of release: what its image carried, else the
// default kernel's.
func (h *Host) level(release string) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l, ok := h.levels[release]; ok {
		return l
	}
	return h.def.Noise
}
