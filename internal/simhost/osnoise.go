package simhost

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"kbisect/configs"
)

// The noise model follows the first seed report (the eventpoll regression
// on a dual-socket PREEMPT_RT server, 950 ms of runtime per period):
//
//   - A kernel has a level: the longest single noise a period of an
//     isolated CPU typically sees. Its image says it as
//     KBISECT_SIM_NOISE_US=<n>; a kernel whose image does not runs at the
//     default kernel's level.
//   - Each measurement draws its own level around the kernel's
//     (log-normal: a quiet kernel varies by ~20 % from run to run, a
//     storm by ~4 %), and each CPU a share of it (88–104 %): the worst
//     CPU, the one the verdict looks at, sits near the level.
//   - Below StormLevel an isolated CPU is quiet, as the seed's good
//     kernel: 3–7 interruptions per period (the residual tick, an IPI),
//     the longest 70–100 % of the level, the others 10–60 % of it.
//   - From StormLevel up it takes an interrupt storm, as the seed's bad
//     kernel: ~6,864 IRQs and ~5,925 thread switches per 950 ms, the
//     longest 90–100 % of the level, about 2,900 times the level of
//     noise in total (17 µs: ~49,000 µs per period, 94.8 % available).
//     The seed's table heads its total noise per period "MAX_NOISE" and
//     its longest single noise "NOISE": its bad kernel has 14–20 µs of
//     the one and 44–50 ms of the other.
//   - A CPU the running kernel does not isolate (a housekeeping CPU, or
//     every CPU of a kernel booted without its isolation parameters)
//     takes the 1000 Hz tick and the machine's interrupts: ~1,000 IRQs,
//     hundreds of thread switches, single noises of 15–50 µs.
//   - One period in 2,000 has a spike: a hardware interruption (an SMI,
//     counted as HW) of 1.5–2.5 times the level.
//
// A host with a noise model (SetNoiseModel, model.go) draws each
// measurement's level from it instead: the boot's level (which may be the
// other side's), the spread within the boot, a spike or a flip; the
// measurement storms when the side it is from (the kernel's, or the other
// for a bad boot or a flip) is at StormLevel or above.
//
// A host told SetNoStorm never storms: its isolated CPUs are quiet at any
// level, as below StormLevel.
//
// Interruptions shorter than tracing_thresh do not count as noise, as in
// the kernel. Everything comes from a generator seeded with the host's
// seed and the number of the measurement: the same seed gives the same
// samples, and no two samples are alike.

// Levels and defaults of the model.
const (
	// DefaultNoise is the level of a kernel that says nothing of its own:
	// a quiet isolated CPU.
	DefaultNoise = 3 * time.Microsecond
	// StormLevel is the level from which isolated CPUs take an interrupt
	// storm.
	StormLevel = 10 * time.Microsecond
	// stormShare is the storm's total noise per period over its longest
	// single noise: the seed's bad kernel loses ~49 ms of 950 to
	// interruptions of 14–20 µs.
	stormShare = 2900
	// DefaultCPUs is how many CPUs the machine has unless SetCPUs says.
	DefaultCPUs = 64
	// NoiseMarker, followed by the level in whole microseconds, is what
	// a kernel image carries to say its noise level.
	NoiseMarker = "KBISECT_SIM_NOISE_US="

	bootUptime  = 35.0   // seconds from a boot until SSH answers and kbisect measures
	spikeChance = 0.0005 // per CPU and period
	seedRuntime = 950000.0
)

// osnoiseRun is what an osnoise script asks of the tracer.
type osnoiseRun struct {
	cpus            configs.CPUs
	period, runtime int64 // µs
	thresh          int64 // µs
	secs            int64
}

var (
	putCPUs    = regexp.MustCompile(`(?m)^\s*put ('[^']*'|\S+) osnoise/cpus\s*$`)
	putPeriod  = regexp.MustCompile(`put (\d+) osnoise/period_us`)
	putRuntime = regexp.MustCompile(`put (\d+) osnoise/runtime_us`)
	putThresh  = regexp.MustCompile(`(?m)^\s*put (\d+) tracing_thresh\s*$`)
	sleepFor   = regexp.MustCompile(`(?m)^\s*sleep (\d+)\s*&?\s*$`)
)

// parseOsnoiseRun reads the values the script writes into tracefs, and
// refuses what the kernel would refuse, with the script's own words.
func parseOsnoiseRun(script string, nrCPUs int) (osnoiseRun, error) {
	run := osnoiseRun{period: 1000000, runtime: 1000000, thresh: 1}
	m := putCPUs.FindStringSubmatch(script)
	sleep := sleepFor.FindStringSubmatch(script)
	if m == nil || sleep == nil {
		return run, fmt.Errorf("simhost: the osnoise script writes no osnoise/cpus or does not sleep")
	}
	list := strings.Trim(m[1], "'")
	cpus, err := configs.ParseCPUs(list, nrCPUs)
	if err != nil || len(cpus) == 0 {
		return run, fmt.Errorf("kbisect: cannot write %s to /sys/kernel/tracing/osnoise/cpus", list)
	}
	run.cpus = cpus
	for _, f := range []struct {
		re  *regexp.Regexp
		dst *int64
	}{{putPeriod, &run.period}, {putRuntime, &run.runtime}, {putThresh, &run.thresh}, {sleepFor, &run.secs}} {
		if m := f.re.FindStringSubmatch(script); m != nil {
			v, err := strconv.ParseInt(m[1], 10, 64)
			if err != nil {
				return run, fmt.Errorf("simhost: %q: %v", m[0], err)
			}
			*f.dst = v
		}
	}
	switch {
	case run.runtime < 100 || run.runtime > run.period:
		return run, fmt.Errorf("kbisect: cannot write %d to /sys/kernel/tracing/osnoise/runtime_us", run.runtime)
	case run.period > 10000000:
		return run, fmt.Errorf("kbisect: cannot write %d to /sys/kernel/tracing/osnoise/period_us", run.period)
	}
	return run, nil
}

// osnoise answers an osnoise tracer script: the trace of the running
// kernel on the CPUs the script asks for, at once (nobody sleeps in the
// simulated lab). A measurement marked by DropMeasurement sends half its
// trace and loses its connection; one marked by HangMeasurement hangs the
// host.
func (h *Host) osnoise(script string, c net.Conn, stdout, stderr io.Writer) int {
	h.mu.Lock()
	k, nrCPUs, seed, floor, stormFrom := h.running, h.cpus, h.seed, h.floor, h.stormLevel()
	h.measured++
	n := h.measured
	drop := h.dropAt[n]
	delete(h.dropAt, n)
	hang := h.lab.measurementFaults(h, n)
	h.mu.Unlock()
	if hang {
		h.waitStall() // nothing answers until the power cycle
		return 0
	}
	run, err := parseOsnoiseRun(script, nrCPUs)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	level := k.Noise
	if level <= 0 {
		level = DefaultNoise
	}
	h.mu.Lock()
	start := h.uptime
	h.uptime += float64(run.secs) + 0.2
	modelled, exact := h.noise.modelled(), h.noise.Exact
	var drawn float64
	var side time.Duration
	if modelled {
		drawn, side = h.drawLevel(level)
	}
	h.mu.Unlock()
	var isolated configs.CPUs
	if bp, err := configs.ParseBootParams(k.Cmdline, 0); err == nil {
		isolated = bp.Isolated()
	}
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	var sample float64
	var storm bool
	if modelled {
		// The model's level is the measurement's; it storms as a
		// kernel of its side does.
		sample, storm = max(drawn, micros(floor)), max(side, floor) >= stormFrom
	} else {
		sample, storm = measurementLevel(rng, max(level, floor), stormFrom)
	}
	var trace []byte
	if modelled && exact {
		trace = exactTrace(run, sample, start, 1000+(n*97)%30000)
	} else {
		trace = osnoiseTrace(rng, run, sample, storm, isolated, start, 1000+(n*97)%30000)
	}
	if drop {
		_, _ = stdout.Write(trace[:len(trace)/2])
		c.Close()
		return 0
	}
	_, _ = stdout.Write(trace)
	return 0
}

// traceHeader is the osnoise tracer's header on a 6.12 PREEMPT_RT kernel
// (seven latency flags; "%%" as the kernel prints it).
const traceHeader = `# tracer: osnoise
#
#                                _-------=> irqs-off
#                               / _------=> need-resched
#                              | / _-----=> need-resched-lazy
#                              || / _----=> hardirq/softirq
#                              ||| / _---=> preempt-depth
#                              |||| / _--=> preempt-lazy-depth
#                              ||||| / _-=> migrate-disable
#                              |||||| /                                               MAX
#                              ||||| /                                             SINGLE      Interference counters:
#                              |||||||               RUNTIME      NOISE  %% OF CPU  NOISE    +-----------------------------+
#           TASK-PID      CPU# |||||||   TIMESTAMP    IN US       IN US  AVAILABLE  IN US     HW    NMI    IRQ   SIRQ THREAD
#              | |         |   |||||||      |           |             |    |            |      |      |      |      |      |
`

// period is one CPU's account of one period, as the tracer prints it.
type period struct {
	noise, maxSingle           int64 // µs
	hw, nmi, irq, sirq, thread int64
}

// osnoiseTrace writes the trace of one measurement at level sample (µs),
// in a storm or not: the header, then one line per CPU and period in time
// order, from start (seconds since boot).
func osnoiseTrace(rng *rand.Rand, run osnoiseRun, sample float64, storm bool, isolated configs.CPUs, start float64, pid int) []byte {
	var b bytes.Buffer
	b.WriteString(traceHeader)
	share := make([]float64, len(run.cpus))
	for i := range share {
		share[i] = 0.88 + 0.16*rng.Float64()
	}
	periods := run.secs * 1000000 / run.period
	for p := int64(0); p < periods; p++ {
		for i, cpu := range run.cpus {
			var pr period
			switch s := sample * share[i]; {
			case !isolated.Contains(cpu):
				pr = housekeepingPeriod(rng, s, storm, run)
			case storm:
				pr = stormPeriod(rng, s, run)
			default:
				pr = quietPeriod(rng, s, run)
			}
			// A line is written when the period's runtime ends.
			ts := start + float64(p*run.period+run.runtime)/1e6 + float64(i)*0.000019 + 0.000004*rng.Float64()
			avail := (run.runtime - pr.noise) * 100 * 100000 / run.runtime
			fmt.Fprintf(&b, "%16s-%-7d [%03d] ....1 %12.6f: %d %10d %3d.%05d %7d %6d %6d %6d %6d %6d\n",
				"<...>", pid+i, cpu, ts, run.runtime, pr.noise, avail/100000, avail%100000,
				pr.maxSingle, pr.hw, pr.nmi, pr.irq, pr.sirq, pr.thread)
		}
	}
	return b.Bytes()
}

// exactTrace is the trace of one measurement under an exact noise model:
// on every CPU, every period's noise is one interruption of sample µs.
func exactTrace(run osnoiseRun, sample float64, start float64, pid int) []byte {
	var b bytes.Buffer
	b.WriteString(traceHeader)
	us := min(int64(math.Round(sample)), run.runtime*95/100)
	avail := (run.runtime - us) * 100 * 100000 / run.runtime
	periods := run.secs * 1000000 / run.period
	for p := int64(0); p < periods; p++ {
		for i, cpu := range run.cpus {
			ts := start + float64(p*run.period+run.runtime)/1e6 + float64(i)*0.000019
			fmt.Fprintf(&b, "%16s-%-7d [%03d] ....1 %12.6f: %d %10d %3d.%05d %7d %6d %6d %6d %6d %6d\n",
				"<...>", pid+i, cpu, ts, run.runtime, us, avail/100000, avail%100000, us, 0, 0, 1, 0, 0)
		}
	}
	return b.Bytes()
}

// quietPeriod is a period of an isolated CPU of a quiet kernel at level s.
func quietPeriod(rng *rand.Rand, s float64, run osnoiseRun) period {
	pr := period{irq: 3 + rng.Int64N(5)}
	if rng.Float64() < 0.05 {
		pr.thread = 1
	}
	singles := []float64{s * (0.7 + 0.3*rng.Float64())}
	for i := int64(1); i < pr.irq+pr.thread; i++ {
		singles = append(singles, s*(0.1+0.5*rng.Float64()))
	}
	if rng.Float64() < spikeChance {
		pr.hw++
		singles = append(singles, s*(1.5+rng.Float64()))
	}
	for _, x := range singles {
		if us := int64(math.Round(x)); us >= run.thresh && us > 0 {
			pr.noise += us
			pr.maxSingle = max(pr.maxSingle, us)
		}
	}
	return pr
}

// stormPeriod is a period of an isolated CPU in an interrupt storm of
// level s: the seed's bad kernel.
func stormPeriod(rng *rand.Rand, s float64, run osnoiseRun) period {
	scale := float64(run.runtime) / seedRuntime
	pr := period{
		irq:    max(0, int64(math.Round(6864*scale+2*rng.NormFloat64()))),
		thread: max(0, int64(math.Round(5925*scale+6*rng.NormFloat64()))),
	}
	if rng.Float64() < 0.25 {
		pr.sirq = 1 + rng.Int64N(2)
	}
	worst := s * (0.9 + 0.1*rng.Float64())
	total := stormShare * s * scale * (1 + 0.01*rng.NormFloat64())
	if rng.Float64() < spikeChance {
		pr.hw++
		spike := s * (1.5 + rng.Float64())
		worst, total = max(worst, spike), total+spike
	}
	return settle(pr, worst, total, run)
}

// housekeepingPeriod is a period of a CPU the kernel does not isolate:
// the tick and the machine's interrupts, and the storm if there is one.
func housekeepingPeriod(rng *rand.Rand, s float64, storm bool, run osnoiseRun) period {
	secs := float64(run.runtime) / 1e6
	pr := period{irq: int64(math.Round(1000*secs)) + rng.Int64N(40), thread: 150 + rng.Int64N(250)}
	worst := max(s, 20) * (0.75 + 0.75*rng.Float64())
	total := float64(pr.irq)*(1.2+0.6*rng.Float64()) + float64(pr.thread)*(2+2*rng.Float64()) + worst
	if storm {
		st := stormPeriod(rng, s, run)
		pr.irq, pr.thread, pr.sirq = pr.irq+st.irq, pr.thread+st.thread, st.sirq
		worst, total = max(worst, float64(st.maxSingle)), total+float64(st.noise)
	}
	return settle(pr, worst, total, run)
}

// settle rounds a period's noise to whole microseconds within what the
// tracer can print: the longest single noise is part of the total, the
// total stays below the runtime, and noises under tracing_thresh do not
// count.
func settle(pr period, worst, total float64, run osnoiseRun) period {
	pr.maxSingle = int64(math.Round(worst))
	if pr.maxSingle < run.thresh {
		pr.maxSingle = 0
	}
	pr.noise = min(max(int64(math.Round(total)), pr.maxSingle), run.runtime*95/100)
	pr.maxSingle = min(pr.maxSingle, pr.noise)
	return pr
}

// levelScanner finds NoiseMarker and its number in a stream written to it
// in pieces.
type levelScanner struct {
	tail  []byte
	us    int64
	found bool
}

const maxLevelDigits = 9

func (s *levelScanner) Write(p []byte) (int, error) {
	if s.found {
		return len(p), nil
	}
	buf := append(s.tail, p...)
	marker := []byte(NoiseMarker)
	for i := 0; ; {
		j := bytes.Index(buf[i:], marker)
		if j < 0 {
			break
		}
		at := i + j
		digits := at + len(marker)
		end := digits
		for end < len(buf) && end-digits < maxLevelDigits && buf[end] >= '0' && buf[end] <= '9' {
			end++
		}
		if end == len(buf) && end-digits < maxLevelDigits {
			// The number may go on in the next piece.
			s.tail = append([]byte(nil), buf[at:]...)
			return len(p), nil
		}
		if end > digits {
			s.us, _ = strconv.ParseInt(string(buf[digits:end]), 10, 64)
			s.found, s.tail = true, nil
			return len(p), nil
		}
		i = digits
	}
	keep := min(len(buf), len(marker)-1)
	s.tail = append([]byte(nil), buf[len(buf)-keep:]...)
	return len(p), nil
}

// level returns the level found, if any (at end of stream, a number that
// ended with it counts).
func (s *levelScanner) level() (time.Duration, bool) {
	if !s.found && len(s.tail) > len(NoiseMarker) {
		if us, err := strconv.ParseInt(string(s.tail[len(NoiseMarker):]), 10, 64); err == nil {
			s.us, s.found = us, true
		}
	}
	if !s.found {
		return 0, false
	}
	return time.Duration(s.us) * time.Microsecond, true
}
