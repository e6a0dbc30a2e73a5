package lab

import (
	"errors"
	"strings"
	"testing"

	"kbisect/remote"
)

// TestAGuestThatRunsOtherwiseThanAskedIsALabFailure: as on a real host, a
// QEMU guest whose kernel runs with another command line is the lab's
// failure, not the kernel's (a skip).
func TestAGuestThatRunsOtherwiseThanAskedIsALabFailure(t *testing.T) {
	f := remote.Facts{Release: "6.12.78-kbisect", Cmdline: "console=ttyS0 root=/dev/vda nohz_full=1", Isolated: "1", NohzFull: "1"}
	expect := remote.Expect{Release: "6.12.78-kbisect", Params: "nohz_full=1", Cmdline: "console=ttyS0 root=/dev/vda nohz_full=1 mitigations=off"}
	err := verifyGuest(f, expect)
	var ie *remote.InfraError
	if !errors.As(err, &ie) || errors.As(err, new(*remote.KernelError)) || !strings.Contains(err.Error(), "mitigations=off is not on the kernel command line") {
		t.Errorf("got %T %v", err, err)
	}
	expect.Cmdline = f.Cmdline
	if err := verifyGuest(f, expect); err != nil {
		t.Errorf("the kernel asked for: %v", err)
	}
}
