// Package noise will own the latency workloads (osnoise tracer, rtla,
// oslat, cyclictest, a custom command), the parsers of their outputs, the
// per-CPU measurements, the statistics and the verdict rules. It arrives
// with the noise issue.
//
// A workload runs wherever it is told: noise needs only the small runner
// interface of internal/shell (shell.Runner), which a remote host and the
// local runner both satisfy, so it never knows about SSH or lab machines.
//
// It may import internal/shell and internal/wrap, no other kbisect package.
package noise
