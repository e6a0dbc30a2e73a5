// Package remote will own the machines kbisect runs on: SSH with verified
// host keys, installing and booting test kernels (kexec, grub one-shot,
// script), power cycles, the console, and the proof that the right kernel
// with the right boot parameters runs. It arrives with the remote issue.
//
// A connected Host runs scripts as a shell.Runner, so the workloads of
// noise run on it without remote knowing them.
//
// It may import configs and internal/shell, no other kbisect package
// (tests also use internal/simhost and internal/sshtest).
package remote
