// Package remote owns the lab machines kbisect runs on, over SSH: dialing
// with verified host keys (known_hosts, a bastion, the ssh-agent, sudo -n
// for a user who is not root, keepalives), running scripts, copying files
// and trees with their checksums checked where they land, installing test
// kernels (image and modules, the oldest ones removed), booting them
// (kexec, a grub one-shot entry or the job's script) with the job's
// parameters, power cycles and the console when a kernel does not come
// back, and the proof that the right kernel with the right boot
// parameters runs (Facts). A failure says whose it is: the kernel's
// (KernelError) or the lab's (InfraError).
//
// A connected Host runs scripts as a shell.Runner, so the workloads of
// noise run on it without remote knowing them.
//
// It may import configs (boot parameters, CPU lists) and the internal
// packages (internal/shell, internal/tartree), no other kbisect package;
// above all not kbuild, whose artifacts it installs from their directory.
// Its tests also use internal/simhost and internal/sshtest.
package remote
