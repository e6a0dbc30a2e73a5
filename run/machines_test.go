package run

import (
	"strings"
	"testing"

	"kbisect/configs"
)

// TestMachinesMayBeReachedByTheBuildServerEachItsOwnWay: several
// machines' job files share their build section but for how the build
// server reaches each (build.to_lab's address, port and identity); what
// it lends them, like the rest, must be the same.
func TestMachinesMayBeReachedByTheBuildServerEachItsOwnWay(t *testing.T) {
	job := func(name, address string, port int, identity string, lend bool) *configs.Job {
		return &configs.Job{Machine: configs.Machine{Name: name}, Build: configs.Build{Tree: "/src/linux", Host: configs.Host{Address: "build1"},
			ToLab: configs.ToLab{Direct: true, Address: address, Port: port, Identity: identity, ForwardAgent: lend}}}
	}
	files := []string{"a.yaml", "b.yaml"}
	if err := sameMachines(files, []*configs.Job{job("a", "10.0.0.1", 22, "~/.ssh/a", false), job("b", "10.0.0.2", 2222, "~/.ssh/b", false)}); err != nil {
		t.Errorf("machines reached each their own way: %v", err)
	}
	err := sameMachines(files, []*configs.Job{job("a", "", 0, "", true), job("b", "", 0, "", false)})
	if err == nil || !strings.Contains(err.Error(), "build differs") {
		t.Errorf("one machine lent a key, the other not: %v", err)
	}
}
