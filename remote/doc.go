// Package remote will own the machines kbisect runs on: SSH with verified
// host keys, installing and booting test kernels (kexec, grub one-shot,
// script), power cycles, the console, and the proof that the right kernel
// with the right boot parameters runs. It arrives with the remote issue.
package remote
