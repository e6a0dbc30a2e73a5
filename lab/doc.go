// Package lab turns a commit into a verdict on a lab machine: it builds
// the commit's kernel (the cache first, the next commits ahead), boots it
// on the job's host or in QEMU and checks that it runs as the job asks,
// measures the job's workload, and decides with the job's rule, keeping
// every commit's evidence in the state directory so that a killed run
// loses no finished step. It also calibrates on the endpoints, walks back
// to a good release, compares two kernels A/B, confirms the first bad
// commit, and spreads the commits over several identical machines.
//
// fromjob.go is the one place where the job file (configs) becomes what
// the lower packages take: kbuild's options, remote's SSH and boot
// options, qemu's guest, noise's workload and rule.
//
// It may import bisect, configs, kbuild, noise, progress (what it tells
// of its work), qemu, remote, verdict, worktree and the internal helpers;
// the test command of git bisect run is testcmd's, not lab's.
package lab
