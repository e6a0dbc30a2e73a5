package noise

// Programs returns the programs the workload runs on the machine beyond a
// POSIX shell's, and whether it drives a tracer through tracefs: what a
// preflight looks for before anything is built.
func (w Workload) Programs() (programs []string, tracefs bool) {
	add := func(p string) {
		for _, q := range programs {
			if q == p {
				return
			}
		}
		programs = append(programs, p)
	}
	switch w.Tool {
	case ToolOsnoise:
		tracefs = true
	case ToolRtlaOsnoise, ToolRtlaTimerlat:
		add("rtla")
		tracefs = true
	case ToolOslat, ToolCyclictest:
		add(w.Tool)
	}
	switch {
	case w.Tool == ToolCommand && len(w.CPUs) > 0:
		add("taskset")
	case w.Tool != ToolCommand && w.Tool != ToolOsnoise && len(w.Housekeeping) > 0:
		add("taskset")
	}
	if w.Load != "" {
		add("setsid")
		if len(w.LoadCPUs) > 0 {
			add("taskset")
		}
	}
	return programs, tracefs
}
