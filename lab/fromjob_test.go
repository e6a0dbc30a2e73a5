package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/configs"
	"kbisect/internal/simhost"
)

// hostJob is a job whose kernels build from the config of an emulated
// host's running kernel.
func hostJob(t *testing.T, k simhost.Kernel) (*configs.Job, *simhost.Host) {
	t.Helper()
	sim := simhost.Start(t, k)
	dir := t.TempDir()
	kh := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(kh, []byte(sim.KnownHostsLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "job.yaml")
	yml := fmt.Sprintf(`apiVersion: kbisect/v1
kind: Job
machine: {name: rt-box, cpus: 4}
host: {address: 127.0.0.1, port: %d, user: root, identity: %s, known_hosts: %s}
boot: {method: kexec, params: "nohz_full=1-3 isolcpus=1-3"}
build: {tree: /, config: host, cache_dir: %s}
`, sim.Port, sim.Identity, kh, filepath.Join(dir, "cache"))
	if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	job, err := configs.Load(path, configs.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return job, sim
}

func TestTheHostsConfigIsFetchedOnceAndKept(t *testing.T) {
	cfg := "#\n# Linux/x86 6.1.119 Kernel Configuration\n#\nCONFIG_PREEMPT_RT=y\nCONFIG_NO_HZ_FULL=y\n"
	job, _ := hostJob(t, simhost.Kernel{Release: "6.1.0-28-rt-amd64", Version: "#1 SMP PREEMPT_RT", Cmdline: "ro", Config: cfg})
	var said strings.Builder
	path, err := BaseConfig(context.Background(), job, &said)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(string(job.Build.CacheDir), "host-configs", "rt-box.config"); path != want {
		t.Errorf("kept at %s, want %s", path, want)
	}
	b, _ := os.ReadFile(path)
	header, rest, _ := strings.Cut(string(b), "\n")
	if rest != cfg || !strings.HasPrefix(header, "# kbisect: the config of 6.1.0-28-rt-amd64 on root@127.0.0.1:") {
		t.Errorf("kept:\n%s", b)
	}
	// The next build starts from the same file, whatever the host runs.
	said.Reset()
	if again, err := BaseConfig(context.Background(), job, &said); err != nil || again != path || !strings.Contains(said.String(), "fetched from the host before") {
		t.Errorf("second time: %s %v %q", again, err, said.String())
	}
}

func TestAHostWithoutItsOwnConfigIsRefusedWithWhatToDo(t *testing.T) {
	for _, tc := range []struct {
		k    simhost.Kernel
		want string
	}{
		{simhost.Kernel{Release: "6.1.0-28-rt-amd64", Cmdline: "ro"},
			"has neither /proc/config.gz (CONFIG_IKCONFIG_PROC) nor /boot/config-6.1.0-28-rt-amd64; give build.config a file instead"},
		{simhost.Kernel{Release: "6.12.78-kbisect-0123456789ab", Cmdline: "ro", Config: "CONFIG_PREEMPT_RT=y\n"},
			"runs 6.12.78-kbisect-0123456789ab, a kernel kbisect built: its config is kbisect's, not the machine's"},
	} {
		job, _ := hostJob(t, tc.k)
		_, err := BaseConfig(context.Background(), job, &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "build.config host: ") {
			t.Errorf("%s: %v", tc.k.Release, err)
		}
		if _, err := os.Stat(filepath.Join(string(job.Build.CacheDir), "host-configs")); err == nil {
			t.Errorf("%s: a config was kept", tc.k.Release)
		}
	}
}
