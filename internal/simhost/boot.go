package simhost

import (
	"os"
	"slices"
	"strings"
	"time"

	"kbisect/configs"
)

// reboot drops every connection and boots k, as the fault for its
// release says.
func (h *Host) reboot(k Kernel) {
	time.Sleep(100 * time.Millisecond) // the command's answer gets out first
	h.mu.Lock()
	fault := h.faultOf(k.Release)
	if fault == FaultStaleCmdline {
		k.Cmdline = h.running.Cmdline
	}
	h.mu.Unlock()
	h.goDown()
	h.comeUp(k, fault)
}

// comeUp boots k, as fault says, on a host that is down.
func (h *Host) comeUp(k Kernel, fault Fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bootID, h.uptime = newID(), bootUptime
	h.lab.runsOfBoot = 0
	switch fault {
	case FaultNeverBack:
		h.boots = append(h.boots, k.Release+" (hung)")
		return // stays down until the power cycle
	case FaultWrongRelease:
		k = Kernel{Release: WrongRelease, Version: h.def.Version, Cmdline: h.def.Cmdline, Noise: h.def.Noise}
	case FaultPanicReboot:
		k = h.def
	case FaultNoIsolation:
		var keep []string
		for _, w := range strings.Fields(k.Cmdline) {
			name, _, _ := strings.Cut(w, "=")
			if !slices.Contains(configs.IsolationParams, name) {
				keep = append(keep, w)
			}
		}
		k.Cmdline = strings.Join(keep, " ")
	}
	h.running = k
	h.boots = append(h.boots, k.Release)
	h.down = false
	h.bootedAgain()
}

// goDown takes the host off the network for as long as a reboot takes:
// every connection drops, and new ones are closed unanswered.
func (h *Host) goDown() {
	h.mu.Lock()
	h.down = true
	h.mu.Unlock()
	h.dropAll()
	time.Sleep(300 * time.Millisecond)
}

// watchPowerCycle does what a BMC does when PowerCycleCommand runs: the
// host goes down and comes back on its default kernel.
func (h *Host) watchPowerCycle(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := os.Stat(h.cycle); err != nil {
			continue
		}
		os.Remove(h.cycle)
		h.goDown()
		h.mu.Lock()
		h.bootID, h.running, h.down, h.uptime = newID(), h.def, false, bootUptime
		h.boots = append(h.boots, h.def.Release+" (power cycle)")
		h.endStall()
		h.bootedAgain()
		h.mu.Unlock()
	}
}
