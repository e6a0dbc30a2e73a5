// Package noise owns the latency workloads and what kbisect makes of
// them: the scripts that run the osnoise tracer, rtla osnoise and
// timerlat, oslat, cyclictest or a custom command (with an optional
// background load) on the machine under test; the parsers of every
// output those tools print, into per-CPU measurements; the metrics and
// their aggregates over CPUs; the statistics (Mann-Whitney comparisons,
// medians of boots); the verdict rules that turn samples into good, bad
// or unsure; the A/B comparison of two kernels; and the tables and text
// of a measurement.
//
// A workload runs wherever it is told: noise needs only the small runner
// interface of internal/shell (shell.Runner), which a remote host and the
// local runner both satisfy, so it never knows about SSH or lab machines.
// The job file's vocabulary (tool and metric names) is repeated here, not
// imported: a test holds the two in step.
//
// It may import verdict, internal/shell, internal/wrap and
// internal/cpulist, no other kbisect package.
package noise
