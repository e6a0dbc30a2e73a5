package configs

import "strings"

// MaxBuildSlots bounds build.slots: each slot is a worktree and an output
// directory of a few GiB on the build server.
const MaxBuildSlots = 64

// validateBuildHost checks the build server's keys: reached as the lab
// host is, with a clone of its own named, the other keys refused without
// it.
func (l *loader) validateBuildHost() {
	b := &l.job.Build
	h := &b.Host
	if h.Address == "" {
		for _, key := range []string{"build.host", "build.remote_tree", "build.slots", "build.host_kbisect", "build.to_lab"} {
			if l.isSet(key) {
				l.errorf(l.at(key), key, "is for a build server: set build.host.address, or remove it")
				return
			}
		}
		return
	}
	if !hostWord.MatchString(h.Address) || strings.HasPrefix(h.Address, "-") {
		l.errorf(l.at("build.host.address"), "build.host.address", "%q is not a host name or IP address", h.Address)
	}
	if h.Sudo {
		l.errorf(l.at("build.host.sudo"), "build.host.sudo", "kernels are built as build.host.user, never as root: remove it")
	}
	l.validateSSH("build.host", h, false)
	switch {
	case b.RemoteTree == "":
		l.missingf("build.remote_tree", "missing: the path of the build server's clone of the kernel tree (git clone URL PATH there)")
	case strings.ContainsAny(b.RemoteTree, "\n\x00") || strings.HasPrefix(b.RemoteTree, "-"):
		l.errorf(l.at("build.remote_tree"), "build.remote_tree", "%q is not a path", b.RemoteTree)
	}
	if l.isSet("build.slots") {
		l.intRange("build.slots", b.Slots, 1, MaxBuildSlots)
	}
	if k := b.HostKbisect; k != "" && (strings.ContainsAny(k, "\n\x00") || strings.HasPrefix(k, "-")) {
		l.errorf(l.at("build.host_kbisect"), "build.host_kbisect", "%q is not a path", k)
	}
	l.validateToLab()
}

// validateToLab checks how the build server reaches the lab host.
func (l *loader) validateToLab() {
	t := &l.job.Build.ToLab
	if l.job.Boot.Method == BootQEMU {
		if l.isSet("build.to_lab") {
			l.errorf(l.at("build.to_lab"), "build.to_lab", "is for a lab host the build server can reach: a QEMU guest runs on this controller and gets its kernels from here; remove it")
		}
		return
	}
	if t.Address != "" && (!hostWord.MatchString(t.Address) || strings.HasPrefix(t.Address, "-")) {
		l.errorf(l.at("build.to_lab.address"), "build.to_lab.address", "%q is not a host name or IP address", t.Address)
	}
	if l.isSet("build.to_lab.port") {
		l.intRange("build.to_lab.port", t.Port, 1, 65535)
	}
	switch id := t.Identity; {
	case id != "" && (strings.ContainsAny(id, "\n\x00") || strings.HasPrefix(id, "-")):
		l.errorf(l.at("build.to_lab.identity"), "build.to_lab.identity", "%q is not a path", id)
	case id != "" && t.ForwardAgent:
		l.errorf(l.at("build.to_lab.forward_agent"), "build.to_lab.forward_agent", "lends this controller's key, and build.to_lab.identity names one on the server: keep one")
	}
}
