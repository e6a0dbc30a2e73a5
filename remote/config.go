package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"kbisect/internal/shell"
)

// configScript prints the running kernel's release, then its config:
// /proc/config.gz (CONFIG_IKCONFIG_PROC) or the distribution's
// /boot/config-<release>.
const configScript = `# kbisect:config
r=$(uname -r)
echo "$r"
if [ -r /proc/config.gz ]; then
	gzip -dc /proc/config.gz
elif [ -r "/boot/config-$r" ]; then
	cat "/boot/config-$r"
else
	echo "the running kernel $r has neither /proc/config.gz (CONFIG_IKCONFIG_PROC) nor /boot/config-$r" >&2
	exit 3
fi
`

// RunningConfig reads the config of the kernel the host runs, and that
// kernel's release.
func (h *Host) RunningConfig(ctx context.Context) (config []byte, release string, err error) {
	out, _, err := h.Run(ctx, shell.Cmd{Script: configScript})
	var ee *shell.ExitError
	if errors.As(err, &ee) && ee.Code == 3 {
		return nil, "", fmt.Errorf("%s: %s; give build.config a file instead", h.Name(), strings.TrimSpace(ee.Stderr))
	}
	if err != nil {
		return nil, "", err
	}
	release, text, ok := strings.Cut(string(out), "\n")
	if !ok || !strings.Contains(text, "CONFIG_") {
		return nil, "", fmt.Errorf("%s: the running kernel's config came back without a CONFIG_ line", h.Name())
	}
	return []byte(text), release, nil
}
