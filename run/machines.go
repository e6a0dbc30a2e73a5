package run

import (
	"fmt"
	"reflect"
	"strings"

	"kbisect/configs"
	"kbisect/internal/usage"
)

// stateJobName is where the state directory keeps the i-th job file.
func stateJobName(i int) string {
	if i == 0 {
		return "job.yaml"
	}
	return fmt.Sprintf("job-%d.yaml", i+1)
}

// FileSafe makes a name fit for one file name: no slashes or NULs.
func FileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == '\\' {
			return '_'
		}
		return r
	}, s)
}

// sameMachines checks that several job files describe identical machines
// tested the same way: only where and how each is reached may differ.
func sameMachines(files []string, jobs []*configs.Job) error {
	first := jobs[0]
	for i, j := range jobs[1:] {
		for _, d := range []struct {
			key  string
			a, b any
		}{
			{"machine.cpus", first.Machine.CPUs, j.Machine.CPUs},
			{"machine.arch", first.Machine.Arch, j.Machine.Arch},
			{"boot.params", first.Boot.Params, j.Boot.Params},
			{"boot.extra_cmdline", first.Boot.ExtraCmdline, j.Boot.ExtraCmdline},
			{"build", sameBuild(first.Build), sameBuild(j.Build)},
			{"workload", first.Workload, j.Workload},
			{"verdict", first.Verdict, j.Verdict},
		} {
			if !reflect.DeepEqual(d.a, d.b) {
				return usage.Errorf("run --job %s and --job %s: %s differs; several job files must describe identical machines measured the same way (only machine.name, host, boot methods and how the build server reaches each, build.to_lab's address, port and identity, may differ)", files[0], files[i+1], d.key)
			}
		}
		if j.Machine.Name == first.Machine.Name {
			return usage.Errorf("run --job %s and --job %s: both name the machine %q", files[0], files[i+1], j.Machine.Name)
		}
	}
	return nil
}

// sameBuild is what must be the same in the build sections of several
// machines: all but how the build server reaches each one.
func sameBuild(b configs.Build) configs.Build {
	b.ToLab.Address, b.ToLab.Port, b.ToLab.Identity = "", 0, ""
	return b
}
