package lab

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"kbisect/configs"
	"kbisect/internal/shell"
	"kbisect/remote"
)

// hostKeys are the host section's keys a dial problem names: the build
// server's are under build.host.
var hostKeys = regexp.MustCompile(`\bhost\.(address|port|user|identity|known_hosts|jump|connect_timeout)\b`)

// buildServerProblems checks the build server of build.host as a run will
// use it: reached with a verified key, its clone a git tree, git, make,
// the compiler, ccache and the compile farm's client there, room in its
// home directory, and a kbisect that can run there.
func buildServerProblems(ctx context.Context, job *configs.Job) []remote.Problem {
	s := NewBuildServer(job, "")
	opt := s.SSH
	dialProblem := func(err error) []remote.Problem {
		p := remote.DialProblem(err, opt)
		return []remote.Problem{{What: "build server: " + hostKeys.ReplaceAllString(p.What, "build.host.$1"), Fix: hostKeys.ReplaceAllString(p.Fix, "build.host.$1")}}
	}
	h, err := remote.Dial(ctx, opt)
	if err != nil {
		return dialProblem(err)
	}
	defer h.Close()
	b := job.Build
	tools := []string{"git", "make", serverCompiler(b.MakeVars)}
	if b.CCache {
		tools = append(tools, "ccache")
	}
	if w := b.Wrapper(); len(w) > 0 {
		tools = append(tools, w[0])
	}
	kb := b.HostKbisect
	script := "cd \"$HOME\" || exit 1\n" +
		"for t in " + shell.Join(tools...) + "; do command -v \"$t\" >/dev/null 2>&1 || echo \"missing=$t\"; done\n" +
		"( cd " + shell.Quote(strings.TrimPrefix(s.Tree, "~/")) + " 2>/dev/null && git rev-parse --git-dir >/dev/null 2>&1 ) || echo notree=1\n" +
		"echo \"avail=$(df -Pk . | awk 'NR==2 {print $4}')\"\n" +
		"echo \"uname=$(uname -sm)\"\n"
	if kb != "" {
		script += "test -x " + shell.Quote(kb) + " || echo nokbisect=1\n"
	}
	out, _, err := h.Run(ctx, shell.Cmd{Script: script})
	if err != nil {
		return dialProblem(err)
	}
	var problems []remote.Problem
	add := func(what, fix string) {
		problems = append(problems, remote.Problem{What: "build server " + h.Name() + ": " + what, Fix: fix})
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		key, value, _ := strings.Cut(line, "=")
		switch key {
		case "missing":
			add(value+" is not installed there", "install it on the build server ("+installOnServer(value)+")")
		case "notree":
			add("build.remote_tree "+s.Tree+" is not a git clone there", "clone the kernel there: git clone URL "+s.Tree)
		case "avail":
			if kib, err := strconv.ParseUint(value, 10, 64); err == nil && kib*1024 < buildRoom {
				add(fmt.Sprintf("its home directory has %d MiB free, a build needs at least %d MiB", kib/1024, buildRoom>>20), "free space in the build server's home directory (its ~/.cache/kbisect/build-cache)")
			}
		case "uname":
			if want, ok := serverArch(); kb == "" && (!ok || value != want && !(want == "Linux aarch64" && value == "Linux arm64")) {
				add("it is "+value+", this kbisect runs on "+want, "install kbisect there and set build.host_kbisect to its path")
			}
		case "nokbisect":
			add("build.host_kbisect "+kb+" is not an executable there", "install kbisect there (go install), or correct build.host_kbisect")
		}
	}
	return problems
}

// serverCompiler is the compiler the build server's make runs.
func serverCompiler(vars map[string]string) string {
	if cc := strings.Fields(vars["CC"]); len(cc) > 0 {
		return cc[len(cc)-1]
	}
	if vars["LLVM"] != "" && vars["LLVM"] != "0" {
		return "clang"
	}
	return vars["CROSS_COMPILE"] + "gcc"
}

// installOnServer says what installs a build tool on a Debian server.
func installOnServer(tool string) string {
	switch {
	case tool == "make" || strings.HasSuffix(tool, "gcc"):
		return "Debian: apt-get install build-essential, or the cross compiler"
	case tool == "git", tool == "ccache", tool == "clang", tool == "distcc", tool == "icecc":
		return "Debian: apt-get install " + tool
	}
	return "its package"
}
