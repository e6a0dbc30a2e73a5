// Package kbuild owns the kernel builds: the .config of a commit (a base
// config or make target, the job's fragments and options merged over it
// as scripts/kconfig/merge_config.sh merges them, then olddefconfig), the
// check that every requested option is really set (the PREEMPT_RT that
// olddefconfig drops without a word when EXPERT is missing), with the
// reason read from the tree's Kconfig files; make, run in build slots (a
// git worktree of the user's tree and an output directory each, so the
// user's checkout is never touched and a step rebuilds only what
// changed); the artifacts (image, System.map, config, modules tarball,
// vmlinux signature) in a content-addressed cache with least recently
// used eviction; and telling a commit that does not build from a build
// machine that cannot build.
//
// It may import configs, worktree and the internal packages
// (internal/shell, internal/tartree), no other kbisect package: above all
// not remote, which installs what kbuild built without either knowing the
// other.
package kbuild
