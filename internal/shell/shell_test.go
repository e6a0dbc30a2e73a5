package shell

import (
	"context"
	"os/exec"
	"testing"
)

func TestQuoteIsOneWordForSh(t *testing.T) {
	for _, s := range []string{"", "plain", "two words", "it's", `a"b`, "$HOME", "`id`", "a\nb", "*", "-n", "x=1 y"} {
		out, err := exec.Command("/bin/sh", "-c", `printf %s `+Quote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("Quote(%q) = %s: sh printed %q (%v)", s, Quote(s), out, err)
		}
	}
	if got := Quote("nohz_full=1-16,33-48"); got != "nohz_full=1-16,33-48" {
		t.Errorf("a plain word was quoted: %s", got)
	}
	if got := Join("git", "-C", "/a b", "rev-parse", "x^{tree}"); got != `git -C '/a b' rev-parse 'x^{tree}'` {
		t.Errorf("Join: %s", got)
	}
}

func TestTraceReachesTheContextsTracer(t *testing.T) {
	Trace(context.Background(), "h", "nobody listens") // no tracer: nothing happens
	var got []string
	ctx := WithTracer(context.Background(), func(where, command string) { got = append(got, where+"|"+command) })
	ctx, cancel := context.WithCancel(ctx) // a derived context keeps it
	defer cancel()
	Trace(ctx, "", "make -j2")
	Trace(ctx, "root@lab", "uname -r")
	if len(got) != 2 || got[0] != "|make -j2" || got[1] != "root@lab|uname -r" {
		t.Errorf("traced %q", got)
	}
}

func TestQuoteLeavesPlainWordsAndQuotesTheRest(t *testing.T) {
	for in, want := range map[string]string{"1-3": "1-3", "a b": "'a b'", "it's": `'it'\''s'`, "": "''", "$(reboot)": "'$(reboot)'"} {
		if got := Quote(in); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}
