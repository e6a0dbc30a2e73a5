// Package noise will own the latency workloads (osnoise tracer, rtla,
// oslat, cyclictest, a custom command), the parsers of their outputs, the
// per-CPU measurements, the statistics and the verdict rules. It arrives
// with the noise issue.
package noise
