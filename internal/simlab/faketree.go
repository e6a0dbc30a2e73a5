package simlab

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// FakeTree makes, for a test, a git repository with the simulated tree's
// build system (BuildFiles: its Makefile behaves like the kernel's for
// the targets kbuild uses, with O=, and logs every compile in
// $(O)/compiled.log so tests can count them; its Kconfig files have the
// 6.12 dependencies of the RT options) and three C files, one commit per
// entry of changes (file → content), and returns its path and the
// commits, oldest first.
func FakeTree(tb testing.TB, changes ...map[string]string) (string, []string) {
	tb.Helper()
	dir := tb.TempDir()
	run := func(args ...string) string {
		tb.Helper()
		c := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@kbisect", "-c", "user.name=t"}, args...)...)
		out, err := c.CombinedOutput()
		if err != nil {
			tb.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q")
	files := BuildFiles()
	files["kernel/main.c"] = "int helper(void);\nint main(void) { return helper(); }\n"
	files["kernel/helper.c"] = "int helper(void) { return 0; }\n"
	files["kernel/eventpoll.c"] = "int ep_poll_callback(void) { return 1; }\n"
	var commits []string
	for i, change := range append([]map[string]string{files}, changes...) {
		for name, content := range change {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				tb.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
		run("add", "-A")
		run("commit", "-q", "-m", "commit "+string(rune('0'+i)))
		commits = append(commits, run("rev-parse", "HEAD"))
	}
	return dir, commits
}
