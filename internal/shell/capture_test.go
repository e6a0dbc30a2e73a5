package shell

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"
)

// overCap prints one byte more than MaxOutput on stdout, then would run
// on for ten minutes: only a runner that stops it at the cap returns
// before the test's own deadline.
var overCap = "head -c " + strconv.Itoa(MaxOutput+1) + " /dev/zero; sleep 600"

// TestAScriptThatPrintsPastTheCapIsStopped: the local runner keeps the
// first MaxOutput bytes of stdout, stops the script, and says which
// stream passed which limit.
func TestAScriptThatPrintsPastTheCapIsStopped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, _, err := LocalRunner{}.Run(ctx, Cmd{Script: overCap})
	var oe *OutputError
	if !errors.As(err, &oe) || oe.Stream != "stdout" || oe.Limit != MaxOutput {
		t.Fatalf("got %v, want the stdout's OutputError", err)
	}
	if len(out) != MaxOutput {
		t.Errorf("kept %d bytes of stdout, want %d", len(out), MaxOutput)
	}
	if want := "the script printed more than 64 MiB on its stdout and was stopped"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}
