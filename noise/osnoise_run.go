package noise

import (
	"fmt"
	"strings"
	"time"

	"kbisect/internal/shell"
)

// osnoiseScript drives the osnoise tracer through tracefs, without rtla:
// every file the run depends on is written (a crashed earlier run, or
// rtla before 6.15, leaves its own values behind), and the tracer is put
// back to nop however the script ends.
func (w Workload) osnoiseScript() string {
	period, runtime := w.Period, w.Runtime
	if period == 0 {
		period = time.Second
	}
	if runtime == 0 {
		runtime = period
	}
	thresh := w.NoiseThreshold
	if thresh == 0 {
		thresh = time.Microsecond
	}
	secs := wholeSeconds(w.Duration) // busybox sleep takes no fractions
	var b strings.Builder
	fmt.Fprintf(&b, `# kbisect:osnoise
set -u
T=${KBISECT_TRACEFS:-}
if [ -z "$T" ]; then
	for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
		if [ -e "$d/available_tracers" ]; then T=$d; break; fi
	done
fi
if [ -z "$T" ]; then
	mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null && T=/sys/kernel/tracing || exit %d
fi
grep -qw osnoise "$T/available_tracers" || exit %d
cur=$(cat "$T/current_tracer")
case $cur in
nop|osnoise) ;;
*) echo "kbisect: the $cur tracer is in use on this machine: stop it first" >&2; exit %d ;;
esac
put() { printf '%%s\n' "$1" > "$T/$2" || { echo "kbisect: cannot write $1 to $T/$2" >&2; exit 1; }; }
sleeper=
trap 'if [ -n "$sleeper" ]; then kill "$sleeper" 2>/dev/null; fi; echo 0 > "$T/tracing_on"; echo nop > "$T/current_tracer"' EXIT
trap 'exit 143' TERM HUP INT
put nop current_tracer
put 0 tracing_on
if [ -e "$T/osnoise/options" ]; then put DEFAULTS osnoise/options; fi
if [ -e "$T/events/osnoise/enable" ]; then put 0 events/osnoise/enable; fi
put %d tracing_thresh
put %s osnoise/cpus
# period and runtime bound each other: raise the period first, or lower
# the runtime first.
if [ %d -gt "$(cat "$T/osnoise/period_us")" ]; then
	put %d osnoise/period_us; put %d osnoise/runtime_us
else
	put %d osnoise/runtime_us; put %d osnoise/period_us
fi
put 0 osnoise/stop_tracing_us
put 0 osnoise/stop_tracing_total_us
: > "$T/trace"
printf 'osnoise\n' > "$T/current_tracer" || { echo "kbisect: the osnoise tracer does not start: is rtla or another tracer instance using it (see $T/instances)?" >&2; exit %d; }
put 1 tracing_on
# In the background, waited for: a shell runs a trap only once its
# foreground command ends, and a SIGTERM that reaches the group while
# sleep is being forked would leave the tracer on for the whole sleep.
sleep %s &
sleeper=$!
wait "$sleeper"
sleeper=
put 0 tracing_on
cat "$T/trace"
for s in "$T"/per_cpu/cpu*/stats; do
	[ -e "$s" ] || continue
	o=$(sed -n 's/^overrun: //p' "$s")
	if [ -n "$o" ] && [ "$o" != 0 ]; then
		c=${s%%/stats}; echo "kbisect-warning: ${c##*/} lost $o events: the trace buffer overflowed" >&2
	fi
done
`, exitNoTracefs, exitNoTracer, exitTracerBusy,
		thresh/time.Microsecond, shell.Quote(cpuList(w.CPUs)),
		period/time.Microsecond, period/time.Microsecond, runtime/time.Microsecond,
		runtime/time.Microsecond, period/time.Microsecond, exitTracerBusy, secs)
	return b.String()
}
